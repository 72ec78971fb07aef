#!/usr/bin/env bash
# Stoa vs nginx, static files over loopback, interleaved rounds of wrk.
#
#   bench/compare-static.sh [--rounds N] [--duration SECS] [--threads T] [--connections C]
#                           [--baseline STOA_BINARY]
#                           [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#
# Both servers run one worker with the access log on (to a file). Each round runs
# wrk against both servers for every row ({1k,10k,100k} x {keep-alive, close}); the
# server that goes first alternates between rounds. Each server is pinned to the
# same CPU (default 0) and wrk to the others, and every run records the server's
# CPU per request and wrk's CPU: a row where wrk used its whole core measured wrk. --baseline adds a third server,
# "stoa-base": another stoa binary (an earlier build) run with the same flags, so a
# change to stoa is judged before/after in the same interleaved rounds. Results go
# to bench-results/<date>-<host>-static/. See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=5
DURATION=5
THREADS=1
CONNS=64
BASELINE=""
PIN=1
SERVER_CPUS=""
HARNESS_CPUS=""
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --duration=DURATION --threads=THREADS --connections=CONNS --baseline=BASELINE
    --server-cpus=SERVER_CPUS --harness-cpus=HARNESS_CPUS --no-pin=PIN=0" "$@"
require_positive "rounds, duration, threads and connections must be positive integers" \
    "$ROUNDS" "$DURATION" "$THREADS" "$CONNS"

ensure_commands nginx:nginx wrk:wrk python3:python3 timeout:coreutils git:git taskset:util-linux
[[ -z "$BASELINE" || -x "$BASELINE" ]] || die "--baseline: $BASELINE is not an executable file"
bench_setup
bench_begin static
DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"

NGINX_DIR="$BENCH_TMP/nginx"
NGINX_LOG="$BENCH_TMP/nginx-access.log"
nginx_up "$NGINX_DIR" "$DOCROOT" 75s 4096 "$NGINX_LOG"
log "nginx (master $NGINX_PID) on 127.0.0.1:$NGINX_PORT"

stoa_args() { # stoa_args ACCESS_LOG: the flags both stoa builds run with
    STOA_ARGS=(--docroot "$DOCROOT" --workers 1 --access-log "$1" --log-format combined --keepalive-timeout 75s)
}
SERVERS=(nginx)
declare -A PORT=([nginx]="$NGINX_PORT") PID=([nginx]="$NGINX_PID") ACCESS_LOG=([nginx]="$NGINX_LOG")
if [[ -n "$BASELINE" ]]; then
    BASE_SHA="$(sha256sum "$BASELINE" | cut -c1-16)"
    cp "$BASELINE" "$BENCH_TMP/stoa-base"
    CANDIDATE_BIN="$STOA_BIN"
    STOA_BIN="$BENCH_TMP/stoa-base"
    ACCESS_LOG[stoa-base]="$BENCH_TMP/stoa-base-access.log"
    stoa_args "${ACCESS_LOG[stoa-base]}"
    start_stoa "$BENCH_TMP/stoa-base-stderr.log" "${STOA_ARGS[@]}"
    STOA_BIN="$CANDIDATE_BIN"
    log "stoa-base ($BASELINE, sha256 $BASE_SHA; pid $STOA_PID) on 127.0.0.1:$STOA_PORT"
    SERVERS+=(stoa-base)
    PORT[stoa-base]="$STOA_PORT"
    PID[stoa-base]="$STOA_PID"
    check_fetch "$STOA_PORT" "$DOCROOT" stoa-base
fi
STOA_LOG="$BENCH_TMP/stoa-access.log"
stoa_args "$STOA_LOG"
start_stoa "$BENCH_TMP/stoa-stderr.log" "${STOA_ARGS[@]}"
log "stoa (pid $STOA_PID) on 127.0.0.1:$STOA_PORT"
SERVERS+=(stoa)
PORT[stoa]="$STOA_PORT"
PID[stoa]="$STOA_PID"
ACCESS_LOG[stoa]="$STOA_LOG"

NGINX_WORKER_PIDS="$(nginx_workers "$NGINX_PID")"
MEASURE_PIDS=("$NGINX_WORKER_PIDS")
for s in "${SERVERS[@]}"; do MEASURE_PIDS+=("${PID[$s]}"); done
SERVER_CPU_PIDS[nginx]="$(tr '\n' ' ' <<<"$NGINX_WORKER_PIDS")"
for s in "${SERVERS[@]}"; do
    [[ $s == nginx ]] || SERVER_CPU_PIDS[$s]="${PID[$s]}"
done
default_pinning
if ((PIN)); then
    for s in "${SERVERS[@]}"; do pin_tree "$SERVER_CPUS" "${PID[$s]}"; done
    WRK_CPUS="$HARNESS_CPUS"
fi
check_fetch "$NGINX_PORT" "$DOCROOT" nginx
check_fetch "$STOA_PORT" "$DOCROOT" stoa

after_run() {
    : >"${ACCESS_LOG[$1]}" # keep the disk bounded; both logs stay open and on
    servers_alive
}

WRKLOG="$OUT/wrk.log"
: >"$WRKLOG"
warm_up "$CONNS" 1k 10k 100k
sleep 1 # let buffered access-log lines reach the files
for s in "${SERVERS[@]}"; do
    [[ -s "${ACCESS_LOG[$s]}" ]] || die "$s wrote no access-log lines during the warm-up"
    log "$s access log after warm-up: $(wc -l <"${ACCESS_LOG[$s]}") lines; sample: $(tail -n 1 "${ACCESS_LOG[$s]}")"
    : >"${ACCESS_LOG[$s]}"
done
servers_alive

ROWS=(1k-keepalive 1k-close 10k-keepalive 10k-close 100k-keepalive 100k-close)
new_raw_csv
announce_rounds
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${SERVERS[@]}"
    for row in "${ROWS[@]}"; do
        file="${row%%-*}"
        mode="${row#*-}"
        measure_row "$r" "$row" "/$file.bin" "$mode" "$CONNS" "${ORDER[@]}"
    done
done

check_background "after the run (servers idle)"

python3 "$BENCH_DIR/summarize.py" "$RAW" nginx stoa | tee "$OUT/summary.txt"
if [[ -n "$BASELINE" ]]; then
    echo | tee -a "$OUT/summary.txt"
    python3 "$BENCH_DIR/summarize.py" "$RAW" stoa-base stoa | tee -a "$OUT/summary.txt"
fi
save_config "$NGINX_DIR/nginx.conf" "$OUT/nginx.conf"

{
    readme_header "Static files: stoa vs nginx"
    readme_section Setup
    if ((PIN)); then
        echo "- Loopback only (127.0.0.1). Each server (all its threads, \`taskset -a -c -p\`) on CPU(s) $SERVER_CPUS,"
        echo "  wrk on CPU(s) $HARNESS_CPUS."
    else
        echo "- Loopback only (127.0.0.1). Not pinned: wrk and the server share the machine's $(nproc) cores."
    fi
    echo "- Files: 1k.bin (1024 B), 10k.bin (10240 B), 100k.bin (102400 B), random bytes."
    echo "- nginx: 1 worker, sendfile, tcp_nopush, open_file_cache, access log on (combined,"
    echo "  to a file), keepalive_timeout 75s, keepalive_requests 1000. Config: nginx.conf (\$TMP = temp dir)."
    echo "- stoa: \`stoa serve --listen 127.0.0.1:0 ${STOA_ARGS[*]/#$BENCH_TMP/\$TMP}\`"
    echo "  (access log on, combined format, to a file)."
    echo "- Load: \`wrk -t$THREADS -c$CONNS -d${DURATION}s --latency URL\`, plus \`-H 'Connection: close'\` for the close rows."
    echo "- $ROUNDS rounds; in each round every row runs against both servers back to back;"
    echo "  nginx goes first in odd rounds, stoa in even ones. 2 s warm-up per server and file first."
    echo "- Access logs are truncated after every run (the servers keep logging)."
    if [[ -n "$BASELINE" ]]; then
        echo "- stoa-base: the baseline build \`$BASELINE\` (sha256 $BASE_SHA…), same flags as stoa"
        echo "  (its own access log); it runs between nginx and stoa in every round, so stoa and"
        echo "  stoa-base swap the earlier slot from round to round. The second table of"
        echo "  summary.txt is the ratio stoa/stoa-base."
    fi
    readme_background
    readme_section Files
    echo "- raw.csv: round,row,server,req_per_sec,transfer (bytes/s),errors (socket errors + non-2xx/3xx),"
    echo "  other_cpu_pct (% of all CPU used by processes other than wrk and the servers during the run),"
    echo "  server_cpu_us_per_op (the server's utime + stime over the run per request: nginx's worker, stoa's"
    echo "  process), harness_cpu_pct (wrk's CPU, % of one core), server_kernel_pct (stime's share of that CPU)"
    echo "- summary.txt: medians over rounds and the per-round ratio stoa/nginx (median, min, max), for"
    echo "  requests per second and for server CPU per request. Where wrk used its whole core, req/s is"
    echo "  wrk's limit and the CPU table is the comparison of the servers."
    echo "- wrk.log: every wrk output"
    readme_summary
} >"$OUT/README.md"
results_done
