#!/usr/bin/env python3
"""The summary of bench/compare-web99.sh.

    web99_summary.py summary OUT ROUNDS MIX_LOAD PROFILE PROFILE_LOAD "SERVERS" LOAD...
    web99_summary.py folded FILE

`summary`: for each load and server, medians over the rounds of the
operations per second, conformance, the server's CPU per operation with its
kernel share, and each server's ratio to nginx (median and range of the
per-round ratios); the mix row (stoa's own CPU, its CGI children's, its state
thread's POST commits, and a dynamic operation's cost against a static one); the
harness's share of its cores, with runs past 70 % marked harness-bound; and,
when profiled, system calls per operation by name.

`folded`: where a flame graph's samples went (folded stacks with kernel frames
annotated `_[k]`): user space and kernel, and the kernel's share by system call
and for the network receive work done on behalf of the peer.
"""
import json
import os
import re
import statistics
import sys

HARNESS_BOUND = 0.70
# The static GETs' share of the SPECweb99 mix (the rest: dynamic GET, custom ads,
# POST, CGI).
STATIC_SHARE = 0.70


def run(out, server, label):
    with open(f"{out}/{server}-{label}/report.json") as f:
        d = json.load(f)
    it = d["iterations"][0]
    h = it["harness"]
    with open(f"{out}/{server}-{label}.server-ticks") as f:
        v = [int(x) for x in f.read().split()]
    (u0, s0, cu0, cs0), (u1, s1, cu1, cs1), tck = v[0:4], v[4:8], v[8]
    ops = h["ops_all_phases"] or 1
    su, ss = (u1 - u0) / tck, (s1 - s0) / tck
    # stoa's web99 state thread (its POST commits), when recorded.
    recorded = len(v) >= 11
    state = (v[10] - v[9]) / tck if recorded else 0.0
    posts = sum(it.get("posts_sent") or []) or 1
    try:
        with open(f"{out}/{server}-{label}.disk") as f:
            d0, d1 = (int(x) for x in f.read().split())
        disk_mb = (d1 - d0) * 512 / 1e6
    except (OSError, ValueError):
        disk_mb = None
    return {
        "disk_mb": disk_mb,
        "state_recorded": recorded,
        "state_us": state * 1e6 / ops,
        "post_us": state * 1e6 / posts,
        "ops_s": it["ops_per_sec"],
        "conf": it.get("percent_conform") or 0.0,
        "us": (su + ss) * 1e6 / ops,
        "sys": ss / (su + ss) if su + ss else 0.0,
        "cgi_us": ((cu1 - cu0) + (cs1 - cs0)) / tck * 1e6 / ops,
        "harness": h["share_of_its_cores"],
    }


def disk(rows):
    """The median of the rows' disk reads in MB, '-' if not recorded."""
    values = [r["disk_mb"] for r in rows if r["disk_mb"] is not None]
    return f"{statistics.median(values):.1f}" if values else "-"


def warm_line(out):
    """What reading the whole file set before each run took from the disks, or
    None if the runs were not preceded by that read (--no-warm)."""
    reads, secs = [], []
    for name in sorted(os.listdir(out)):
        if name.endswith(".warm"):
            with open(f"{out}/{name}") as f:
                d0, d1, t = (int(x) for x in f.read().split())
            reads.append((d1 - d0) * 512 / 1e6)
            secs.append(t)
    if not reads:
        return None
    return (f"the whole file set was read before each of the {len(reads)} runs: it took "
            f"{statistics.median(secs):.0f} s and read {spread(reads)} MB from the disks (median [range])")


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def spread(values):
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def mix_rows(out, server, rounds, mix_load, loads):
    """Prints SERVER's mix row: its CPU per operation against its static-only run
    in the same round, its CGI children's, its state thread's POST commits, and a
    dynamic operation's cost against a static one."""
    rows = [run(out, server, f"mix-{mix_load}-r{r}") for r in rounds]
    static = [run(out, server, f"{mix_load}-r{r}") for r in rounds] if mix_load in loads else None
    vs = spread([m["us"] / s["us"] for m, s in zip(rows, static)]) if static else "-"
    print(f"{server + ' mix':9} {mix_load:>6} {med(rows, 'ops_s'):7.0f} {med(rows, 'conf'):6.1f} "
          f"{med(rows, 'us'):12.1f} {100 * med(rows, 'sys'):5.0f}% {'/static ' + vs:>22} "
          f"{100 * med(rows, 'harness'):11.0f}%")
    print(f"{'  + CGI':9} {'':>6} {'':>7} {'':>6} {med(rows, 'cgi_us'):12.1f}   (the CGI processes' CPU, "
          f"per operation of the whole mix)")
    recorded = all(m["state_recorded"] for m in rows)
    if recorded:
        print(f"{'  commits':9} {'':>6} {'':>7} {'':>6} {med(rows, 'state_us'):12.1f}   (in the row above: the "
              f"state thread, {med(rows, 'post_us'):.0f} µs per POST, its write + fdatasync)")
    if static:
        # A dynamic operation against a static one, from the mix's split (70 %
        # static GETs): with the POSTs' durable commits, and without them.
        def dyn(m, s, drop=0.0):
            return ((m["us"] - drop) / s["us"] - STATIC_SHARE) / (1 - STATIC_SHARE)
        with_commit = spread([dyn(m, s) for m, s in zip(rows, static)])
        without = spread([dyn(m, s, m["state_us"]) for m, s in zip(rows, static)])
        print(f"{'  dynamic':9} op / static op: {with_commit}"
              + (f"; without the commits: {without}" if recorded else ""))
    return rows


def summary(out, rounds, mix_load, profile, profile_load, servers, loads):
    rounds = range(1, int(rounds) + 1)
    servers = servers.split()
    print(f"{'server':9} {'load':>6} {'ops/s':>7} {'conf%':>6} {'server µs/op':>12} {'kernel':>6} "
          f"{'/nginx median [range]':>22} {'harness core':>12} {'disk MB':>8}")
    bound = []
    for load in loads:
        by = {s: [run(out, s, f"{load}-r{r}") for r in rounds] for s in servers}
        for s in servers:
            rows = by[s]
            ratio = "-" if s == "nginx" else spread([a["us"] / b["us"] for a, b in zip(rows, by["nginx"])])
            bound += [f"{s} {load} round {r}" for r, x in zip(rounds, rows) if x["harness"] > HARNESS_BOUND]
            print(f"{s:9} {load:>6} {med(rows, 'ops_s'):7.0f} {med(rows, 'conf'):6.1f} {med(rows, 'us'):12.1f} "
                  f"{100 * med(rows, 'sys'):5.0f}% {ratio:>22} {100 * med(rows, 'harness'):11.0f}% {disk(rows):>8}")
    if int(mix_load) > 0:
        mixes = {}
        for server in [x for x in servers if x != "nginx"]:
            mixes[server] = mix_rows(out, server, rounds, mix_load, loads)
        if "stoa-base" in mixes:
            pairs = zip(mixes["stoa"], mixes["stoa-base"])
            print(f"  stoa mix / stoa-base mix, CPU per operation: {spread([a['us'] / b['us'] for a, b in pairs])}")
    print()
    print("Medians over the rounds. server µs/op: the server's CPU (user + kernel) per operation the harness")
    print("finished; kernel: its system time's share; /nginx: the per-round ratio of CPU per operation to")
    print("nginx's in the same round, median [lowest-highest]; the mix row's ratio is to stoa's static-only")
    print("run at the same load in the same round. harness core: the harness's share of its cores.")
    print("disk MB: what the disks read during the run, median (the file set not all in the page cache:")
    print("the server waited for the disk and spent CPU on it; '-': not recorded).")
    warm = warm_line(out)
    print(warm[0].upper() + warm[1:] + "." if warm else "The file set was not read before the runs (--no-warm).")
    print("harness-bound runs (harness over 70 % of its cores): " + (", ".join(bound) or "none"))
    if int(profile):
        print()
        syscalls(out, profile_load)


def syscalls(out, load):
    """System calls per operation of each profiled server, by name."""
    per = {}
    for s in ("nginx", "stoa"):
        try:
            with open(f"{out}/{s}-syscalls.perfstat") as f:
                text = f.read()
        except OSError:
            return
        ops = run(out, s, f"profile-{load}")["ops_s"] * 10
        counts = {}
        for m in re.finditer(r"^\s*([\d,]+)\s+syscalls:sys_enter_(\w+)", text, re.M):
            n = int(m.group(1).replace(",", ""))
            if n:
                counts[m.group(2)] = n / ops
        per[s] = counts
    names = sorted(set(per["nginx"]) | set(per["stoa"]),
                   key=lambda n: -(per["nginx"].get(n, 0) + per["stoa"].get(n, 0)))
    print(f"System calls per operation at {load} connections (perf stat, 10 s of the steady phase):")
    print(f"{'call':18} {'nginx':>7} {'stoa':>7}")
    for n in names:
        a, b = per["nginx"].get(n, 0), per["stoa"].get(n, 0)
        if a >= 0.01 or b >= 0.01:
            print(f"{n:18} {a:7.2f} {b:7.2f}")
    print(f"{'all':18} {sum(per['nginx'].values()):7.2f} {sum(per['stoa'].values()):7.2f}")


# Kernel frames that mark the peer's side of loopback (its receive processing
# and wake-up) and the syscall entry points.
PEER = ("tcp_v4_rcv", "sock_def_readable", "tcp_data_queue")
# A system call's entry, under whichever name the kernel kept after inlining.
SYSCALL = re.compile(r"(?:__x64_sys_|__do_sys_|__sys_|ksys_)(\w+?)_\[k\]$")


def folded(path):
    total = kernel = peer = 0
    by_call = {}
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            n = int(count)
            frames = stack.split(";")
            total += n
            if frames[-1].endswith("_[k]"):
                kernel += n
                if any(p in fr for fr in frames for p in PEER):
                    peer += n
                call = next((m.group(1) for fr in frames if (m := SYSCALL.match(fr))),
                            "(no system call: interrupts, scheduling)")
                by_call[call] = by_call.get(call, 0) + n
    if not total:
        print("no samples")
        return
    pct = lambda n: f"{100 * n / total:5.1f} %"
    print(f"sampled CPU time: {total / 1e9:.2f} s")
    print(f"user space: {pct(total - kernel)}   kernel: {pct(kernel)}")
    print(f"  of which receive processing and wake-ups of the other end (tcp_v4_rcv, tcp_data_queue,")
    print(f"  sock_def_readable in the stack): {pct(peer)}")
    print("kernel by system call:")
    for call, n in sorted(by_call.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {call:40} {pct(n)}")


if __name__ == "__main__":
    if sys.argv[1] == "summary":
        summary(*sys.argv[2:8], sys.argv[8:])
    else:
        folded(sys.argv[2])
