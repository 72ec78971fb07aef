#!/usr/bin/env bash
# Memory per idle keep-alive connection: stoa vs nginx (user space, RSS of the
# process that holds the connections).
#
#   bench/idle-memory.sh [--rounds N] [--connections N] [--settle SECS]
#
# Four variants, each in a fresh server process, interleaved over the rounds:
# nginx (1 worker; its worker process is measured) and stoa (--workers 1), each with
# the access log off and on. bench/idle-memory.py opens the connections, makes one
# request on each and measures. Results go to bench-results/<date>-<host>-idle-memory/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
CONNS=10000
SETTLE=3
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --connections=CONNS --settle=SETTLE" "$@"
require_positive "rounds, connections and settle must be positive integers" "$ROUNDS" "$CONNS" "$SETTLE"

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git
# The client and each server hold CONNS descriptors; nginx's worker raises its own
# limit (worker_rlimit_nofile) and stoa raises its soft limit to the hard one.
bench_setup 65536
NOFILE="$(ulimit -n)"
if [[ "$NOFILE" != unlimited ]] && ((NOFILE < CONNS + 100)); then
    die "open-file limit $NOFILE is too low for $CONNS connections (run as root or raise ulimit -Hn)"
fi

bench_begin idle-memory
DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"
JSONDIR="$BENCH_TMP/json"
mkdir -p "$JSONDIR"
RUNLOG="$OUT/runs.log"
: >"$RUNLOG"

WC=$((CONNS * 2 > 20000 ? CONNS * 2 : 20000))
VARIANTS=(nginx-log-off stoa-log-off nginx-log-on stoa-log-on)
STATUS_NOTES=()
INFO_NOTES=()

# run_variant ROUND VARIANT: one fresh server, one idle-memory.py run.
run_variant() {
    local round="$1" variant="$2" port pid pids target rc=0 dir
    dir="$BENCH_TMP/$variant-r$round"
    mkdir -p "$dir"
    case "$variant" in
        nginx-*)
            local alog=off
            [[ "$variant" == *-on ]] && alog="$dir/access.log"
            nginx_up "$dir" "$DOCROOT" 120s "$WC" "$alog" "worker_rlimit_nofile $((WC * 2));"
            port="$NGINX_PORT"
            pid="$NGINX_PID"
            pids="$(nginx_workers "$NGINX_PID" | paste -sd, -)"
            [[ -n "$pids" ]] || die "no nginx worker under master $NGINX_PID"
            [[ "$pids" != *,* ]] || die "expected one nginx worker, found $pids"
            ;;
        stoa-*)
            local alog=off
            [[ "$variant" == *-on ]] && alog="$dir/access.log"
            start_stoa "$dir/stderr.log" --docroot "$DOCROOT" --workers 1 --keepalive-timeout 120s \
                --access-log "$alog" --log-format combined
            port="$STOA_PORT"
            pid="$STOA_PID"
            pids="$STOA_PID"
            ;;
    esac
    target="127.0.0.1:$port"
    log "round $round $variant: $target, measuring pid(s) $pids"
    timeout --foreground --kill-after=5 $((180 + SETTLE)) python3 "$BENCH_DIR/idle-memory.py" \
        --pid "$pids" -n "$CONNS" --settle "$SETTLE" --timeout 150 \
        --json "$JSONDIR/$round-$variant.json" "$target" >"$dir/idle.out" 2>&1 || rc=$?
    {
        echo "=== round $round $variant (pids $pids), exit $rc"
        cat "$dir/idle.out"
    } >>"$RUNLOG"
    cat "$dir/idle.out" >&2
    if [[ "$variant" == nginx-* ]] && grep -q 'setrlimit\|worker_connections are not enough' "$dir/error.log"; then
        local msg
        msg="$(grep 'setrlimit\|worker_connections' "$dir/error.log" | head -1 | sed 's/^.*\[alert\] [0-9#]*: //')"
        log "nginx error log: $msg"
        INFO_NOTES+=("nginx error log ($variant): $msg")
    fi
    kill -0 "$pid" 2>/dev/null || STATUS_NOTES+=("round $round $variant: the server process died")
    stop_server "$pid"
    case "$rc" in
        0) ;;
        3) STATUS_NOTES+=("round $round $variant: some connections were closed by the server") ;;
        *) STATUS_NOTES+=("round $round $variant: idle-memory.py failed (exit $rc), no figures") ;;
    esac
}

log "$ROUNDS rounds x ${#VARIANTS[@]} variants, $CONNS connections each"
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${VARIANTS[@]}"
    for v in "${ORDER[@]}"; do
        run_variant "$r" "$v"
    done
done

check_background "after the run (servers idle)"

NOTES_FILE="$BENCH_TMP/notes.txt"
printf '%s\n' "${STATUS_NOTES[@]}" >"$NOTES_FILE"

python3 - "$JSONDIR" "$OUT/raw.csv" "$NOTES_FILE" <<'EOF' | tee "$OUT/summary.txt"
import csv, glob, json, os, statistics, sys

jsondir, raw_path, notes_path = sys.argv[1:]
runs = []
for path in sorted(glob.glob(os.path.join(jsondir, "*.json"))):
    rnd, variant = os.path.basename(path)[:-5].split("-", 1)
    with open(path) as f:
        runs.append((int(rnd), variant, json.load(f)))
runs.sort()
metrics = ["VmRSS", "Rss", "Pss", "Private_Dirty"]
with open(raw_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["round", "server", "connections", "still_open", "metric", "before_bytes", "after_bytes",
                "settled_bytes", "bytes_per_conn_after", "bytes_per_conn_settled"])
    for rnd, variant, j in runs:
        for m in metrics:
            w.writerow([rnd, variant, j["connections"], j["still_open"], m, j["before"][m], j["after"][m],
                        j["after_settled"][m], round(j["per_conn_after"][m], 1), round(j["per_conn_settled"][m], 1)])

def med(variant, key, m):
    vals = [j[key][m] for _, v, j in runs if v == variant]
    return statistics.median(vals) if vals else float("nan")

variants = ["nginx-log-off", "stoa-log-off", "nginx-log-on", "stoa-log-on"]
n = runs[0][2]["connections"] if runs else 0
print(f"bytes per idle keep-alive connection = (server memory after - before) / {n}; medians over rounds")
print("'after' = right after the last response; 'settled' = after the settle time of idleness")
print()
head = f"{'server':<15} {'metric':<14} {'B/conn after':>13} {'B/conn settled':>15} {'before':>10} {'settled':>10} {'rounds':>6} {'still open':>11}"
print(head)
print("-" * len(head))
for v in variants:
    vr = [j for _, vv, j in runs if vv == v]
    if not vr:
        print(f"{v:<15} (no successful run)")
        continue
    open_txt = f"{min(j['still_open'] for j in vr)}/{n}"
    for m in metrics:
        print(f"{v:<15} {m:<14} {med(v, 'per_conn_after', m):>13.0f} {med(v, 'per_conn_settled', m):>15.0f} "
              f"{med(v, 'before', m) / 1048576:>8.1f}Mi {med(v, 'after_settled', m) / 1048576:>8.1f}Mi {len(vr):>6} {open_txt:>11}")
print()
print("ratio stoa/nginx of the median bytes per connection (per-round ratios min..max in brackets)")
for log in ("off", "on"):
    s, g = f"stoa-log-{log}", f"nginx-log-{log}"
    for m in ("VmRSS", "Private_Dirty"):
        for key, label in (("per_conn_after", "after"), ("per_conn_settled", "settled")):
            gm, sm = med(g, key, m), med(s, key, m)
            per = []
            for rnd in sorted({r for r, _, _ in runs}):
                a = [j[key][m] for r, v, j in runs if r == rnd and v == s]
                b = [j[key][m] for r, v, j in runs if r == rnd and v == g]
                if a and b and b[0] > 0:
                    per.append(a[0] / b[0])
            rng = f"[{min(per):.2f}..{max(per):.2f}]" if per else ""
            ratio = sm / gm if gm > 0 else float("nan")
            print(f"  access log {log:<3} {m:<14} {label:<8} stoa {sm:>8.0f} B / nginx {gm:>8.0f} B = {ratio:6.2f} {rng}")
print()
notes = [l for l in open(notes_path).read().splitlines() if l.strip()]
if notes:
    print("!" * 78)
    for l in notes:
        print("!!! " + l)
    print("!" * 78)
else:
    print(f"all runs completed; every connection was still open at the end")
EOF

{
    readme_header "Idle keep-alive connection memory: stoa vs nginx"
    readme_section Setup
    echo "- Loopback only. $CONNS connections, each: one \`GET /1k.bin HTTP/1.1\`, full response read, then left idle."
    echo "- Memory: VmRSS (/proc/PID/status) and Rss, Pss, Private_Dirty (/proc/PID/smaps_rollup) of the process"
    echo "  holding the connections: the nginx worker (child of the master), the stoa process (all its threads)."
    echo "  'before' is read after one warm-up connection (opened, used, closed); 'after' right after the last"
    echo "  response; 'settled' after ${SETTLE} s of idleness. bytes/conn = (after - before) / $CONNS."
    echo "- nginx: 1 worker, worker_connections $WC, worker_rlimit_nofile $((WC * 2)), keepalive_timeout 120s,"
    echo "  sendfile, tcp_nopush, open_file_cache; access_log off or to a file."
    echo "- stoa: \`stoa serve --workers 1 --keepalive-timeout 120s --access-log off|FILE --log-format combined\`."
    echo "- Every run is a fresh server process; $ROUNDS rounds, the variant order reverses every round."
    readme_section Caveats
    if ((${#INFO_NOTES[@]})); then
        echo "- Server warnings during the runs (the open-file limit $(ulimit -n) still covers $CONNS connections):"
        printf '  - %s\n' "${INFO_NOTES[@]}" | sort -u
    fi
    echo "- User-space memory only: kernel socket structures and buffers are not in RSS."
    echo "- nginx allocates and touches its connection and event arrays (worker_connections entries) at"
    echo "  startup, so that part of its per-connection cost is in 'before', not in the difference. The"
    echo "  'before' and 'settled' columns give the absolute figures."
    readme_background
    readme_section Files
    echo "- raw.csv: one line per round, server variant and metric (bytes)"
    echo "- summary.txt: medians and ratios"
    echo "- runs.log: the output of every idle-memory.py run"
    readme_summary
} >"$OUT/README.md"
results_done
