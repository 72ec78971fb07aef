#!/usr/bin/env bash
# What the harness costs: `stoa bench web --static-only` at several loads against
# stoa serve and nginx (one worker each, same file set), with the harness's CPU
# per operation beside the server's (`--server-pid`), the harness's share of one
# core, and the linear estimate of connections per harness core. One closed-loop
# row (64 connections, no pacing) shows the cost per operation when the harness
# runs flat out, as wrk does.
#
#   bench/harness-cost.sh [--loads "800 3200 6400"] [--run-time SECS]
#
# Results go to bench-results/<date>-<host>-harness-cost/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LOADS="800 3200 6400"
RUN_TIME=30
bench_cmdline "$@"
parse_args "--loads=LOADS --run-time=RUN_TIME" "$@"

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git
bench_setup
bench_begin harness-cost

LIMIT="$(ulimit -n)"
MAX=0
for n in $LOADS; do ((n > MAX)) && MAX=$n; done
((2 * MAX + 100 <= LIMIT)) || die "open-file limit $LIMIT too low for $MAX connections"
DOCROOT="$BENCH_TMP/www"
log "writing the file set for $MAX connections"
"$STOA_BIN" fileset --connections "$MAX" --dir "$DOCROOT" >"$OUT/fileset.txt"

start_stoa "$BENCH_TMP/stoa-stderr.log" --docroot "$DOCROOT" --workers 1 --access-log off \
    --keepalive-timeout 75s --max-connections "$LIMIT"
nginx_up "$BENCH_TMP/nginx" "$DOCROOT" 75s "$LIMIT" off "worker_rlimit_nofile $LIMIT;"
mapfile -t NGINX_WORKERS < <(nginx_workers "$NGINX_PID")

run_one() { # server connections label extra-args...
    local server="$1" n="$2" label="$3" url pids=()
    shift 3
    if [[ $server == stoa ]]; then
        url="http://127.0.0.1:$STOA_PORT"
        pids=(--server-pid "$STOA_PID")
    else
        url="http://127.0.0.1:$NGINX_PORT"
        pids=(--server-pid "$NGINX_PID")
        for p in "${NGINX_WORKERS[@]}"; do pids+=(--server-pid "$p"); done
    fi
    log "$server, $label"
    "$STOA_BIN" bench web --target "$url" --static-only --connections "$n" --run-time "${RUN_TIME}s" \
        "${pids[@]}" "$@" --out "$OUT/$server-$label" >"$OUT/$server-$label.txt" 2>"$OUT/$server-$label.log" ||
        die "harness failed against $server: $(tail -n 3 "$OUT/$server-$label.log")"
}

for n in $LOADS; do
    for server in stoa nginx; do run_one "$server" "$n" "$n"; done
done
for server in stoa nginx; do run_one "$server" 64 closed-64 --closed-loop; done
check_background "after the runs (servers idle)"

python3 - "$OUT" $LOADS <<'PY' | tee "$OUT/summary.txt"
import json, sys
out, loads = sys.argv[1], sys.argv[2:]
print(f"{'server':6} {'load':>10} {'ops/s':>9} {'conf%':>6} {'harness µs/op':>14} {'server µs/op':>13} "
      f"{'h/s':>5} {'harness core':>13} {'conns/core est.':>16}")
for label in loads + ["closed-64"]:
    for s in ("stoa", "nginx"):
        d = json.load(open(f"{out}/{s}-{label}/report.json"))
        it = d["iterations"][0]
        h = it["harness"]
        srv = h["server_cpu_us_per_op"] or 0
        est = h["connections_per_core_estimate"] or 0
        conf = "-" if label.startswith("closed") else f"{it['percent_conform']:.1f}"
        print(f"{s:6} {label:>10} {it['ops_per_sec']:9.0f} {conf:>6} {h['cpu_us_per_op']:14.1f} {srv:13.1f} "
              f"{h['cpu_us_per_op'] / srv if srv else 0:5.2f} {100 * h['core_share']:12.1f}% "
              f"{'-' if label.startswith('closed') else f'{est:.0f}':>16}")
PY
{
    readme_header "Harness cost: CPU per operation of \`stoa bench web\` beside the server's" Command
    readme_section Setup
    echo "- File set for $MAX connections; stoa serve and nginx with 1 worker, access log off, same directory."
    echo "- \`stoa bench web --static-only --connections N --run-time ${RUN_TIME}s --server-pid …\` (harness on one"
    echo "  load thread) at each load, then \`--closed-loop\` with 64 connections. Harness and server share the 2 cores."
    echo "- CPU: the harness's own process CPU over its generators' run (all phases); the server's from"
    echo "  /proc/PID/stat (nginx: master and worker). µs/op divides by every operation finished in all phases."
    echo "- conns/core est.: connections ÷ the harness's share of one core, a linear extrapolation."
    describe_background
    readme_summary
} >"$OUT/README.md"
results_done
