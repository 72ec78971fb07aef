#!/usr/bin/env python3
"""The summary of `stoa bench web --find-max` runs against several servers.

    findmax_summary.py LABEL NAME=REPORT_DIR...   (the first NAME is the ratio's numerator)

Prints each server's most conforming connections, every trial with the
harness's and the server's share of their own cores, what ended the search,
and the ratio of the first server to the others. A trial whose harness used
more than the harness-bound share (70 %) is marked HARNESS-BOUND, one whose
server used at least 90 % SATURATED. The verdict is the report's "limit",
judged at the first failing trial (just above the score): "server" (its cores
saturated, the harness's not), "neither" (a failure with CPU to spare on both
sides) and "server-not-measured" leave the score the server's; "harness",
"both" and "search-cap" make it a lower bound, never the server's score.
Reports from before the limit existed fall back to "harness_bound".
"""
import json
import sys


def load(path):
    with open(f"{path}/report.json") as f:
        return json.load(f)


def main():
    label, pairs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    rows = []
    for name, path in pairs:
        d = load(path)
        score = d["score"] or 0
        placement = d.get("placement", {})
        trials = []
        for t in d["find_max"]:
            share = t.get("harness_share_of_its_cores")
            mark = "ok" if t["passed"] else "fail"
            if share is not None:
                mark += f" h{share * 100:.0f}%"
            if t.get("harness_bound"):
                mark += " HARNESS-BOUND"
            server = t.get("server_share_of_its_cores")
            if server is not None:
                mark += f" s{server * 100:.0f}%"
            if t.get("server_saturated"):
                mark += " SATURATED"
            trials.append(f"{t['connections']}:{mark}")
        limit = d.get("limit")
        if limit is None:
            limit = "harness" if d.get("harness_bound") else "server-not-measured"
        bound = limit in ("harness", "both", "search-cap")
        rows.append((name, score, bound))
        where = ""
        if placement.get("harness_cpus") or placement.get("server_cpus"):
            where = f"   (server CPUs {placement.get('server_cpus') or 'any'}, harness CPUs {placement.get('harness_cpus') or 'any'})"
        verdict = {
            "server": "the server's limit (its cores saturated)",
            "neither": "the server's limit (no core saturated: it missed the rules with CPU to spare)",
            "server-not-measured": "the server's limit, unconfirmed (its CPU not measured)",
            "harness": "harness-bound: a lower bound, not the server's score",
            "both": "both sides out of CPU: a lower bound, not the server's score",
            "search-cap": "no trial failed: a lower bound set by the search's limit",
        }.get(limit, limit)
        print(f"{label} {name:6} most conforming connections: {score:6}   {verdict}{where}")
        print(f"{'':{len(label)}} {'':6} trials {', '.join(trials)}")
        if d.get("limit_detail"):
            print(f"{'':{len(label)}} {'':6} limit: {d['limit_detail']}")
    first, score0, bound0 = rows[0]
    for name, score, bound in rows[1:]:
        if not score:
            print(f"{name}: no passing trial")
            continue
        note = ""
        if bound0 or bound:
            note = "  (a lower bound on either side: this ratio is not the servers')"
        print(f"{label} ratio {first}/{name}: {score0 / score:.3f}{note}")


if __name__ == "__main__":
    main()
