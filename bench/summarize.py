#!/usr/bin/env python3
"""Summarise a raw.csv written by lib/web.sh's measure_row (compare-tls.sh, compare-h2.sh)
or in its format (compare-smtp.sh, compare-pop3.sh).

The raw.csv of `stoa bench peers` (compare-static.sh, compare-web99.sh,
compare-runtime.sh) has other columns and is not read here: the Rust writes its
summary.txt from the same rows (crates/bench/src/peers/results.rs).

    summarize.py [--unit req/s] [--log wrk.log] [--errors TEXT] RAW_CSV BASELINE CANDIDATE

raw.csv columns: round,row,server,req_per_sec,transfer,errors[,other_cpu_pct
[,server_cpu_us_per_op,harness_cpu_pct[,server_kernel_pct]]] (transfer in bytes/s,
errors = socket errors + non-2xx/3xx responses as counted by wrk, other_cpu_pct = %
of all CPU used by other processes during the run, server_cpu_us_per_op = the
server's CPU per request, harness_cpu_pct = the load tool's CPU in % of one core,
server_kernel_pct = the kernel's (stime's) share of the server's CPU; the last three
may be empty).

Per row it prints the median req/s of each server over the rounds, and the median,
min and max of the per-round ratio CANDIDATE/BASELINE (each ratio pairs the two
runs of the same round, which ran back to back). Rows with any error are flagged.
Where the server's CPU per request was recorded, a second table gives its median
per server, the per-round ratio CANDIDATE/BASELINE, and the load tool's median CPU;
where the kernel share was recorded, also each server's, and CANDIDATE's kernel time
alone against BASELINE's whole CPU per request (what CANDIDATE would cost with no
user-space time at all).
--unit names the rate column (compare-smtp.sh: msg/s), --log the file with the
details, --errors what the errors column counts.
"""

import csv
import statistics
import sys


def fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}GiB"


def optional(text):
    """A number from an optional column: None when empty or absent."""
    return float(text) if text not in (None, "") else None


def cpu_table(rows, data, base, cand):
    """The server-CPU-per-request table, or nothing when no run recorded it."""
    if not any(v[4] is not None for d in data.values() for v in d.values()):
        return []
    kernel = any(v[6] is not None for d in data.values() for v in d.values())
    head = (
        f"{'row':<22} {base + ' us/req':>14} {cand + ' us/req':>14} "
        f"{'ratio med':>9} {'min':>6} {'max':>6}  {'load tool % of a core':>21}"
    )
    if kernel:
        head += f"  {'kernel % ' + base:>14} {'kernel % ' + cand:>14} {cand + ' kernel/' + base:>16}"
    lines = [
        f"server CPU per request (utime + stime / requests); ratio = {cand}/{base} per round;",
        "the load tool near 100 % of its core means the row measured it, not the servers",
    ]
    if kernel:
        lines.append(f"kernel %: stime's share of the server's CPU; {cand} kernel/{base}: {cand}'s kernel time "
                     f"per request over {base}'s whole CPU per request, per round")
    lines += ["", head, "-" * len(head)]
    for row in rows:
        b = data.get((row, base), {})
        c = data.get((row, cand), {})
        rounds = [r for r in sorted(set(b) & set(c)) if b[r][4] and c[r][4] is not None]
        if not rounds:
            continue
        ratios = [c[r][4] / b[r][4] for r in rounds]
        tool = [v[5] for d in (b, c) for v in d.values() if v[5] is not None]
        lines.append(
            f"{row:<22} {statistics.median(b[r][4] for r in rounds):>14.1f} "
            f"{statistics.median(c[r][4] for r in rounds):>14.1f} "
            f"{statistics.median(ratios):>9.3f} {min(ratios):>6.3f} {max(ratios):>6.3f}  "
            f"{(f'{statistics.median(tool):.0f}' if tool else '-'):>21}"
        )
        if kernel:
            kr = [r for r in rounds if b[r][6] is not None and c[r][6] is not None]
            kb = f"{statistics.median(b[r][6] for r in kr):.0f}" if kr else "-"
            kc = f"{statistics.median(c[r][6] for r in kr):.0f}" if kr else "-"
            alone = f"{statistics.median(c[r][4] * c[r][6] / 100 / b[r][4] for r in kr):.3f}" if kr else "-"
            lines[-1] += f"  {kb:>14} {kc:>14} {alone:>16}"
    lines.append("")
    return lines


def main():
    args = sys.argv[1:]
    unit, logname, what = "req/s", "wrk.log", "socket errors or non-2xx/3xx"
    while args and args[0].startswith("--"):
        if len(args) < 2 or args[0] not in ("--unit", "--log", "--errors"):
            sys.exit(__doc__)
        if args[0] == "--unit":
            unit = args[1]
        elif args[0] == "--log":
            logname = args[1]
        else:
            what = args[1]
        args = args[2:]
    if len(args) != 3:
        sys.exit(__doc__)
    path, base, cand = args
    rows = []  # row names in first-seen order
    data = {}  # (row, server) -> {round: (rps, transfer, errors)}
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            row, server = rec["row"], rec["server"]
            if row not in rows:
                rows.append(row)
            data.setdefault((row, server), {})[int(rec["round"])] = (
                float(rec["req_per_sec"]),
                float(rec["transfer"]),
                int(rec["errors"]),
                float(rec.get("other_cpu_pct") or 0),
                optional(rec.get("server_cpu_us_per_op")),
                optional(rec.get("harness_cpu_pct")),
                optional(rec.get("server_kernel_pct")),
            )

    wr = max(12, len(base) + len(unit) + 1, len(cand) + len(unit) + 1)  # req/s columns
    wx = max(12, len(base) + 7, len(cand) + 7)  # transfer columns
    head = (
        f"{'row':<22} {base + ' ' + unit:>{wr}} {cand + ' ' + unit:>{wr}} "
        f"{'ratio med':>9} {'min':>6} {'max':>6} {'rounds':>6}  "
        f"{base + ' xfer/s':>{wx}} {cand + ' xfer/s':>{wx}}  errors"
    )
    lines = [
        f"ratio = {cand}/{base} per round (same round = back-to-back runs); medians over rounds",
        "",
        head,
        "-" * len(head),
    ]
    flagged = []
    for row in rows:
        b = data.get((row, base), {})
        c = data.get((row, cand), {})
        rounds = sorted(set(b) & set(c))
        ratios = [c[r][0] / b[r][0] for r in rounds if b[r][0] > 0]
        med = lambda d, i: statistics.median(v[i] for v in d.values()) if d else float("nan")
        errs_b = sum(v[2] for v in b.values())
        errs_c = sum(v[2] for v in c.values())
        err_txt = "-" if errs_b == 0 and errs_c == 0 else f"!!! {base}={errs_b} {cand}={errs_c}"
        if err_txt != "-":
            flagged.append(row)
        if ratios:
            rtxt = f"{statistics.median(ratios):>9.3f} {min(ratios):>6.3f} {max(ratios):>6.3f}"
        else:
            rtxt = f"{'n/a':>9} {'n/a':>6} {'n/a':>6}"
        lines.append(
            f"{row:<22} {med(b, 0):>{wr}.0f} {med(c, 0):>{wr}.0f} {rtxt} {len(ratios):>6}  "
            f"{fmt_bytes(med(b, 1)):>{wx}} {fmt_bytes(med(c, 1)):>{wx}}  {err_txt}"
        )
    lines.append("")
    lines += cpu_table(rows, data, base, cand)
    others = sorted(v[3] for d in data.values() for v in d.values())
    if others:
        lines.append(
            f"CPU used by other processes during the runs: median {statistics.median(others):.0f}%, max {others[-1]:.0f}% of all CPU"
        )
        busy = sorted(
            (r, row, server, v[3]) for (row, server), d in data.items() for r, v in d.items() if v[3] > 10
        )
        if busy:
            lines.append(f"!!! {len(busy)} runs disturbed by other work (>10% of all CPU):")
            for r, row, server, pct in busy:
                lines.append(f"!!!   round {r} {row} {server}: {pct:.0f}%")
        lines.append("")
    if flagged:
        lines.append("!" * 78)
        lines.append(f"!!! ERRORS ({what}) in rows: {', '.join(flagged)}")
        lines.append(f"!!! their {unit} may be meaningless; see {logname} for the details")
        lines.append("!" * 78)
    else:
        if what == "socket errors or non-2xx/3xx":
            lines.append("no socket errors and no non-2xx/3xx responses in any run")
        else:
            lines.append(f"no errors ({what}) in any run")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
