//! The JSON of `stoa bench mail`: every figure of the run (the scripts in
//! `bench/` read it; its keys and nesting are a contract).

use serde_json::{Value, json};
use stoa_latency::Latency;
use stoa_mail2001::Rates;
use stoa_mailgen::access::Access;
use stoa_mailgen::qos;
use stoa_mailgen::tally::SizeStats;

use super::{
    BENCHMARK, NOTICE, PERCENTILES, USERS_PER_MPM, best_mpm, established, run_outcome, streams,
    title,
};
use crate::mail::run::{LevelResult, MailRun};

/// A latency histogram's summary, ms; `null` figures when empty.
fn latency_json(l: &Latency) -> Value {
    if l.count() == 0 {
        return json!({"count": 0, "min": null, "max": null, "mean": null,
                      "p50": null, "p90": null, "p95": null, "p99": null});
    }
    let mut v = json!({
        "count": l.count(),
        "min": l.min_ms(),
        "max": l.max_ms(),
        "mean": l.mean_ms(),
    });
    for (name, q) in PERCENTILES {
        v[name] = json!(l.quantile_ms(q));
    }
    v
}

/// A size summary in KB (1,024 bytes).
fn sizes_json(s: &SizeStats) -> Value {
    let has = s.count > 0;
    json!({
        "count": s.count,
        "min": has.then(|| s.min as f64 / 1024.0),
        "max": has.then(|| s.max as f64 / 1024.0),
        "mean": has.then(|| s.mean() / 1024.0),
    })
}

/// The per-second rates of a level's four streams.
fn rates_json(r: &Rates) -> Value {
    json!({
        "user_smtp": r.user_smtp,
        "remote_smtp": r.remote_smtp,
        "initial_pop": r.initial_pop,
        "repeated_pop": r.repeated_pop,
        "smtp_total": r.smtp_total(),
        "pop_total": r.pop_total(),
    })
}

/// One level's figures.
fn level_json(l: &LevelResult) -> Value {
    let t = &l.tally;
    let times: serde_json::Map<String, Value> = t
        .access
        .functions()
        .iter()
        .map(|&f| {
            let name = f.label(t.access).to_owned();
            (name, latency_json(&t.function(f).latency))
        })
        .collect();
    let actual = t.actual_mpm();
    let started: serde_json::Map<String, Value> = streams(l)
        .iter()
        .map(|(name, rate, started)| {
            (
                (*name).to_owned(),
                json!({"started": started, "expected": rate * t.window_secs}),
            )
        })
        .collect();
    json!({
        "load_percent": (l.load * 100.0).round() as i64,
        "attempted": {"users": l.rates.users * l.load, "mpm": l.rates.mpm * l.load},
        "actual": {"users": actual * USERS_PER_MPM, "mpm": actual},
        "rates": rates_json(&l.rates),
        "summary": qos::summary_rows(t),
        "detail": qos::detail_rows(t),
        "counters": t.counters,
        "times_ms": times,
        "sizes_kb": {
            "smtp_data_up": sizes_json(&t.data_up),
            "pop_retrieve_down": sizes_json(&t.retrieve_down),
        },
        "delivery": {
            "attempts": t.delivery.attempts,
            "pass": t.delivery.pass,
            "late": t.delivery.late,
            "lost": t.delivery.lost,
            "connect_errors": t.delivery.connect_errors,
            "times_ms": latency_json(&t.delivery.times),
        },
        "remote": t.remote,
        "sessions_started": started,
        "window_secs": t.window_secs,
        "error_rate_percent": qos::error_percent(t),
        "verdict": l.verdict,
        "wall_secs": l.wall.as_secs_f64(),
        "harness_cpu_secs": l.harness_cpu.map(|d| d.as_secs_f64()),
        "server_cpu_secs": l.server_cpu.map(|d| d.as_secs_f64()),
        "machine_cpu_secs": l.machine_cpu.map(|d| d.as_secs_f64()),
        "generators": l.generators,
        "agents_cpu_secs": l.agents_cpu.map(|d| d.as_secs_f64()),
        "server_processes": l.server_processes.as_ref().map(|p| json!({
            "total_cpu_secs": p.total.as_secs_f64(),
            // What the report's "ms per session" divides by.
            "sessions": t.counters.smtp_ended() + t.counters.pop_ended(),
            "not_attributed_cpu_secs": p.not_attributed.as_secs_f64(),
            "programs": p.programs.iter().map(|g| json!({
                "program": g.name,
                "processes": g.processes,
                "cpu_secs": g.cpu.as_secs_f64(),
            })).collect::<Vec<_>>(),
        })),
    })
}

/// Every figure as JSON.
pub(crate) fn to_json(run: &MailRun) -> Value {
    json!({
        "benchmark": BENCHMARK,
        "access": run.access,
        "notice": NOTICE,
        "title": title(run),
        "server_software": run.server_software,
        "password_scheme": run.password_scheme,
        "mpm": run.mpm,
        "established_mpm": established(run),
        "users": run.users,
        "declared_store": run.declared_store,
        "retry_pool": run.retry_pool,
        "passed": run.passed(),
        "outcome": run_outcome(run),
        "compliant": run.deviations.is_empty(),
        "deviations": run.deviations,
        "find_max": {
            "best_mpm": if run.search.is_empty() { None } else { best_mpm(run) },
            "capacity_mpm": run.capacity_mpm,
            "at_capacity": !run.search.is_empty()
                && best_mpm(run).is_some_and(|b| b >= run.capacity_mpm - 1e-6),
            "trials": run.search,
            "limit": run.limit().map(|(l, _)| l.key()),
            "limit_detail": run.limit().map(|(l, t)| {
                l.words(t.and_then(|t| t.harness), t.and_then(|t| t.server))
            }),
        },
        "levels": run.levels.iter().map(|l| {
            let mut v = level_json(l);
            v["tiers"] = super::system::level_tiers_json(run, l);
            v["harness_window"] = run.harness_load(l).map_or(Value::Null, |h| json!({
                "cpu_secs": l.harness_window_cpu.map(|d| d.as_secs_f64()),
                "cores": h.cores,
                "share_of_its_cores": h.share,
                "harness_bound": h.bound(),
            }));
            v
        }).collect::<Vec<_>>(),
        "tiers": super::system::tiers_json(run),
        "store_check": run.store,
        "sink": run.sink_stats,
        "addresses": {
            "smtp": run.smtp,
            "pop3": (run.access == Access::Pop3).then_some(&run.read_addr),
            "imap": (run.access == Access::Imap).then_some(&run.read_addr),
            "sink": run.sink,
            "domain": run.domain,
            "remote_domain": run.remote_domain,
        },
        "phases": {
            "profile": run.phases.profile,
            "warmup_secs": run.phases.warmup.as_secs_f64(),
            "run_secs": run.phases.run.as_secs_f64(),
            "cooldown_secs": run.phases.cooldown.as_secs_f64(),
        },
        "choices": run.choices,
        "seed": run.seed,
        "threads": run.threads,
        "harness_bound": !super::harness_bound(run).is_empty(),
        "harness_bound_detail": super::harness_bound(run),
        "harness_bound_share": crate::cpus::HARNESS_BOUND_SHARE,
        "placement": {
            "machine_cpus": run.placement.machine,
            "harness_cpus": run.placement.harness.as_ref().map(ToString::to_string),
            "server_cpus": run.placement.server.as_ref().map(ToString::to_string),
            "server_cpus_known": run.placement.server_known,
        },
        "agents": run.agents,
        "probe_share": run.probe_share,
        "started": run.started,
    })
}
