#!/usr/bin/env python3
"""The summary of bench/harness-cost.sh.

    harness_cost_summary.py OUT ROUNDS LOAD...

For each server and load: medians over the rounds of the operations per
second, conformance, the harness's and the server's CPU per operation (with
each one's kernel share), the harness/server ratio (median and range of the
per-round ratios), the same ratio for the harness's kernel time alone (what
a harness with no user-space cost at all would show: the floor for an engine
making the same system calls), the harness's share of its core and the estimate
of paced connections per harness core. Then the closed-loop row.
"""
import json
import statistics
import sys


def run(out, server, label):
    with open(f"{out}/{server}-{label}/report.json") as f:
        d = json.load(f)
    it = d["iterations"][0]
    h = it["harness"]
    with open(f"{out}/{server}-{label}.time") as f:
        hu, hs = (float(x) for x in f.read().split()[-2:])
    with open(f"{out}/{server}-{label}.server-ticks") as f:
        u0, s0, u1, s1, tck = (int(x) for x in f.read().split())
    su, ss = (u1 - u0) / tck, (s1 - s0) / tck
    return {
        "ops": it["ops_per_sec"],
        "conf": it.get("percent_conform"),
        "h": h["cpu_us_per_op"],
        "s": h["server_cpu_us_per_op"] or 0.0,
        "core": h["core_share"],
        "est": h["connections_per_core_estimate"] or 0.0,
        "h_sys": hs / (hu + hs) if hu + hs else 0.0,
        "s_sys": ss / (su + ss) if su + ss else 0.0,
    }


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    out, rounds, loads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print(f"{'server':6} {'load':>6} {'ops/s':>7} {'conf%':>6} {'harness µs/op':>14} {'(kernel)':>8} "
          f"{'server µs/op':>13} {'(kernel)':>8} {'h/s median [range]':>20} {'kernel h/s':>10} {'harness core':>12} "
          f"{'conns/core est.':>15}")
    for load in loads:
        for s in ("stoa", "nginx"):
            rows = [run(out, s, f"{load}-r{r}") for r in range(1, rounds + 1)]
            ratios = [r["h"] / r["s"] for r in rows if r["s"]]
            ratio = (f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
                     if ratios else "-")
            floors = [r["h"] * r["h_sys"] / r["s"] for r in rows if r["s"]]
            floor = f"{statistics.median(floors):.2f}" if floors else "-"
            print(f"{s:6} {load:>6} {med(rows, 'ops'):7.0f} {med(rows, 'conf'):6.1f} {med(rows, 'h'):14.1f} "
                  f"{100 * med(rows, 'h_sys'):7.0f}% {med(rows, 's'):13.1f} {100 * med(rows, 's_sys'):7.0f}% "
                  f"{ratio:>20} {floor:>10} {100 * med(rows, 'core'):11.1f}% {med(rows, 'est'):15.0f}")
    for s in ("stoa", "nginx"):
        r = run(out, s, "closed-64")
        ratio = f"{r['h'] / r['s']:.2f}" if r["s"] else "-"
        floor = f"{r['h'] * r['h_sys'] / r['s']:.2f}" if r["s"] else "-"
        print(f"{s:6} {'closed-64':>6} {r['ops']:7.0f} {'-':>6} {r['h']:14.1f} {100 * r['h_sys']:7.0f}% "
              f"{r['s']:13.1f} {100 * r['s_sys']:7.0f}% {ratio:>20} {floor:>10} {100 * r['core']:11.1f}% {'-':>15}")
    print()
    print("Medians over the rounds; h/s: the harness's CPU per operation over the server's, median of the")
    print("per-round ratios [lowest-highest]. Kernel: system time's share of each one's CPU. kernel h/s:")
    print("the harness's kernel time per operation alone over the server's CPU per operation (median of the")
    print("rounds): the ratio a harness with no user-space cost at all would have, the floor for an engine")
    print("making the same system calls on this machine (harness-profile.txt: where that kernel time goes).")


if __name__ == "__main__":
    main()
