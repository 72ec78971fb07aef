#!/usr/bin/env python3
"""The summary of `stoa bench web --find-max` runs against several servers.

    findmax_summary.py LABEL NAME=REPORT_DIR...   (the first NAME is the ratio's numerator)

Prints each server's most conforming connections, every trial with the
harness's share of its own cores, and the ratio of the first server to the
others. A trial whose harness used more than the harness-bound share (70 %)
is marked: its result may be the harness's limit, so a score that such a
trial ended (the trial above it failed harness-bound) or reached is
reported as harness-bound, a lower bound for the server, never as its score.
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
            trials.append(f"{t['connections']}:{mark}")
        bound = bool(d.get("harness_bound"))
        rows.append((name, score, bound))
        where = ""
        if placement.get("harness_cpus") or placement.get("server_cpus"):
            where = f"   (server CPUs {placement.get('server_cpus') or 'any'}, harness CPUs {placement.get('harness_cpus') or 'any'})"
        verdict = "harness-bound: a lower bound, not the server's score" if bound else "the server's limit"
        print(f"{label} {name:6} most conforming connections: {score:6}   {verdict}{where}")
        print(f"{'':{len(label)}} {'':6} trials {', '.join(trials)}")
    first, score0, bound0 = rows[0]
    for name, score, bound in rows[1:]:
        if not score:
            print(f"{name}: no passing trial")
            continue
        note = ""
        if bound0 or bound:
            note = "  (a harness-bound score on either side: this ratio is not the servers')"
        print(f"{label} ratio {first}/{name}: {score0 / score:.3f}{note}")


if __name__ == "__main__":
    main()
