#!/usr/bin/env python3
"""The summaries of bench/topology-sun.sh, from the harness's result.json files.

    topology_summary.py tiers RESULT.json
    topology_summary.py compare OUT RUNS
    topology_summary.py check RESULT.json

tiers: per level, the QoS result and each tier's CPU and what it handled (the
report's System Configuration, condensed).

check (scripts/test.sh): exits 1, saying why, unless every level of the run
had an error rate under 1 % and every tier was measured: CPU and peak memory of
each, SMTP sessions and messages at the MTA, POP sessions at the POP3 tier, POP
logins and LMTP recipients on the stores.

compare: RUNS holds MODE|ROUND|DIR lines (MODE: direct, stoa, nginx). For each
mode, over the rounds: the proxy tier's CPU per proxied POP3 session, and the p99
of POP Connect, POP Password, POP Status and POP Retrieve with what the proxy adds
to it over the direct run of the same round. A proxied session is a POP login on
the store (its "POP logins" count, every session that reached the mailbox: the
harness's and its delivery probes' polls) -- the same denominator for both proxies;
the harness's own POP session count is shown too.
"""

import json
import os
import statistics
import sys

FUNCTIONS = ["POP Connect", "POP Password", "POP Status", "POP Retrieve"]


def level_at(result, percent):
    for level in result["levels"]:
        if level["load_percent"] == percent:
            return level
    return result["levels"][0]


def tiers(path):
    r = json.load(open(path))
    out = [f"{r['title']}", f"users {r['users']}, claimed {r['mpm']:g} msgs/min", ""]
    roles = [t["role"] for t in r["tiers"]]
    w = max(len(x) for x in roles) if roles else 10
    for level in r["levels"]:
        window = level["window_secs"]
        v = level["verdict"]
        out.append(f"{level['load_percent']}% level: {v['outcome']}"
                   + (f" ({'; '.join(v['failures'])})" if v["failures"] else "")
                   + f", error rate {level['error_rate_percent']:.2f}%, window {window:g} s")
        out.append(f"  {'tier':<{w}}  {'CPU s':>7}  {'core %':>6}  handled in the window")
        for info, t in zip(r["tiers"], level["tiers"]):
            cpu = t["cpu_secs"]
            handled = []
            if t["sessions"] is not None:
                kind = "SMTP" if info["front"] == "smtp" else "POP"
                handled.append(f"{t['sessions']} {kind} sessions (harness)")
            if t["messages"] is not None:
                handled.append(f"{t['messages']} messages (harness)")
            handled += [f"{n} {label} (log)" for label, n in t["counts"].items()]
            cpu_s = "n/a" if cpu is None else f"{cpu:.2f}"
            core = "n/a" if cpu is None or not window else f"{100 * cpu / window:.1f}"
            out.append(f"  {info['role']:<{w}}  {cpu_s:>7}  {core:>6}  {', '.join(handled) or '-'}")
        times = level["times_ms"]
        out.append("  p99 ms: " + ", ".join(
            f"{f} {times[f]['p99']:.1f}" for f in FUNCTIONS if times[f]["p99"] is not None))
        out.append("")
    peaks = ", ".join(f"{t['role']} {t['peak_kib'] / 1024:.1f}" for t in r["tiers"] if t["peak_kib"])
    out.append(f"peak memory (MiB, VmHWM summed): {peaks}")
    print("\n".join(out))


def proxy_figures(result, mode, percent):
    """CPU s of the proxy tier (nginx: without and with auth_http), POP sessions
    (harness), POP logins on the stores, p99 per function."""
    level = level_at(result, percent)
    by_role = {info["role"]: (info, t) for info, t in zip(result["tiers"], level["tiers"])}
    logins = sum(t["counts"].get("POP logins", 0) or 0
                 for role, (_, t) in by_role.items() if role.startswith("POPSTORE"))
    harness = level["counters"]["pop_session"] + level["counters"]["pop_disconnect"]
    cpu = cpu_auth = None
    if mode == "stoa":
        cpu = by_role["MMP (Stoa POP3 proxy)"][1]["cpu_secs"]
    elif mode == "nginx":
        cpu = by_role["MMP (nginx mail proxy)"][1]["cpu_secs"]
        cpu_auth = by_role["MMP auth_http service"][1]["cpu_secs"]
    p99 = {f: level["times_ms"][f]["p99"] for f in FUNCTIONS}
    return {"cpu": cpu, "cpu_auth": cpu_auth, "logins": logins, "harness": harness,
            "p99": p99, "outcome": level["verdict"]["outcome"],
            "error_rate": level["error_rate_percent"]}


def fmt(x, d=2):
    return "n/a" if x is None else f"{x:.{d}f}"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def compare(out_dir, runs_path):
    runs = [line.rstrip("\n").split("|") for line in open(runs_path) if line.strip()]
    figures = {}
    percent = None
    for mode, rnd, d in runs:
        result = json.load(open(os.path.join(out_dir, d, "result.json")))
        if percent is None:
            loads = [lv["load_percent"] for lv in result["levels"]]
            percent = 100 if 100 in loads else loads[0]
        figures[(mode, int(rnd))] = proxy_figures(result, mode, percent)
    rounds = sorted({r for _, r in figures})
    out = [f"Proxy tier at the {percent}% level, {len(rounds)} rounds "
           "(medians over the rounds; per-round figures below)", ""]
    out.append(f"{'':34} {'direct':>10} {'stoa':>10} {'nginx':>10} {'nginx+auth':>11}")

    def per_session(mode, with_auth=False):
        vals = []
        for r in rounds:
            f = figures.get((mode, r))
            if not f or f["cpu"] is None or not f["logins"]:
                continue
            cpu = f["cpu"] + ((f["cpu_auth"] or 0) if with_auth else 0)
            vals.append(1000 * cpu / f["logins"])
        return med(vals)

    out.append(f"{'proxy CPU ms per proxied session':34} {'-':>10} {fmt(per_session('stoa'), 3):>10} "
               f"{fmt(per_session('nginx'), 3):>10} {fmt(per_session('nginx', True), 3):>11}")
    for key, label in [("logins", "POP logins on the store"), ("harness", "POP sessions (harness)")]:
        out.append(f"{label:34} " + " ".join(
            f"{fmt(med([figures[(m, r)][key] for r in rounds if (m, r) in figures]), 0):>10}"
            for m in ["direct", "stoa", "nginx"]))
    for fn in FUNCTIONS:
        out.append(f"{fn + ' p99 ms':34} " + " ".join(
            f"{fmt(med([figures[(m, r)]['p99'][fn] for r in rounds if (m, r) in figures]), 1):>10}"
            for m in ["direct", "stoa", "nginx"]))
    out.append("")
    out.append("Added p99 over direct (ms), median of the per-round differences (same round):")
    for fn in FUNCTIONS:
        row = []
        for m in ["stoa", "nginx"]:
            diffs = [figures[(m, r)]["p99"][fn] - figures[("direct", r)]["p99"][fn]
                     for r in rounds if (m, r) in figures and ("direct", r) in figures
                     and figures[(m, r)]["p99"][fn] is not None
                     and figures[("direct", r)]["p99"][fn] is not None]
            row.append(f"{m} {fmt(med(diffs), 1):>7}")
        out.append(f"  {fn:14} " + "   ".join(row))
    stoa, nginx = per_session("stoa"), per_session("nginx", True)
    if stoa is not None and nginx is not None:
        verdict = "met" if stoa <= nginx else "NOT met"
        out.append("")
        out.append(f"Target (Stoa's proxy costs <= nginx's per session, nginx with its auth_http): "
                   f"{verdict}: {stoa:.3f} vs {nginx:.3f} ms (nginx alone {fmt(per_session('nginx'), 3)} ms)")
    out.append("")
    out.append("Per round:")
    for r in rounds:
        for m in ["direct", "stoa", "nginx"]:
            f = figures.get((m, r))
            if not f:
                continue
            cpu = "" if f["cpu"] is None else f", proxy CPU {f['cpu']:.2f} s"
            if f["cpu_auth"] is not None:
                cpu += f" + auth_http {f['cpu_auth']:.2f} s"
            out.append(f"  round {r} {m:6}: {f['outcome']}, errors {f['error_rate']:.2f}%, "
                       f"{f['logins']} store logins, {f['harness']} harness POP sessions{cpu}; p99 "
                       + ", ".join(f"{fn.split()[1]} {fmt(f['p99'][fn], 1)}" for fn in FUNCTIONS))
    print("\n".join(out))


def check(path):
    r = json.load(open(path))
    problems = []
    if not r["tiers"]:
        problems.append("no tiers in the report")
    for t in r["tiers"]:
        if not t["peak_kib"]:
            problems.append(f"{t['role']}: no peak memory")
    for level in r["levels"]:
        at = f"{level['load_percent']}% level"
        if level["error_rate_percent"] >= 1.0:
            problems.append(f"{at}: error rate {level['error_rate_percent']:.2f}%")
        for info, t in zip(r["tiers"], level["tiers"]):
            where = f"{at}, {info['role']}"
            if t["cpu_secs"] is None:
                problems.append(f"{where}: CPU not measured")
            if info["front"] and not t["sessions"]:
                problems.append(f"{where}: no {info['front']} sessions")
            if info["front"] == "smtp" and not t["messages"]:
                problems.append(f"{where}: no messages")
            for label, n in t["counts"].items():
                if not n:
                    problems.append(f"{where}: no {label} in its log")
    if problems:
        sys.exit("topology check failed:\n  " + "\n  ".join(problems))
    print(f"topology check: {len(r['tiers'])} tiers measured at {len(r['levels'])} level(s)")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "tiers":
        tiers(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
