#!/usr/bin/env bash
# Stoa vs nginx, static files over loopback, interleaved rounds of wrk.
#
#   bench/compare-static.sh [--rounds N] [--duration SECS] [--threads T] [--connections C]
#
# Both servers run one worker with the access log on (to a file). Each round runs
# wrk against both servers for every row ({1k,10k,100k} x {keep-alive, close}); the
# server that goes first alternates between rounds. Results go to
# bench-results/<date>-<host>-static/. See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=5
DURATION=5
THREADS=1
CONNS=64
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --duration=DURATION --threads=THREADS --connections=CONNS" "$@"
require_positive "rounds, duration, threads and connections must be positive integers" \
    "$ROUNDS" "$DURATION" "$THREADS" "$CONNS"

ensure_commands nginx:nginx wrk:wrk python3:python3 timeout:coreutils git:git
bench_setup
bench_begin static
DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"

NGINX_DIR="$BENCH_TMP/nginx"
NGINX_LOG="$BENCH_TMP/nginx-access.log"
nginx_up "$NGINX_DIR" "$DOCROOT" 75s 4096 "$NGINX_LOG"
log "nginx (master $NGINX_PID) on 127.0.0.1:$NGINX_PORT"

STOA_LOG="$BENCH_TMP/stoa-access.log"
STOA_ARGS=(--docroot "$DOCROOT" --workers 1 --access-log "$STOA_LOG" --log-format combined --keepalive-timeout 75s)
start_stoa "$BENCH_TMP/stoa-stderr.log" "${STOA_ARGS[@]}"
log "stoa (pid $STOA_PID) on 127.0.0.1:$STOA_PORT"

MEASURE_PIDS=("$NGINX_PID" "$(nginx_workers "$NGINX_PID")" "$STOA_PID")
check_fetch "$NGINX_PORT" "$DOCROOT" nginx
check_fetch "$STOA_PORT" "$DOCROOT" stoa

SERVERS=(nginx stoa)
declare -A PORT=([nginx]="$NGINX_PORT" [stoa]="$STOA_PORT")
declare -A PID=([nginx]="$NGINX_PID" [stoa]="$STOA_PID")
declare -A ACCESS_LOG=([nginx]="$NGINX_LOG" [stoa]="$STOA_LOG")

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
save_config "$NGINX_DIR/nginx.conf" "$OUT/nginx.conf"

{
    readme_header "Static files: stoa vs nginx"
    readme_section Setup
    echo "- Loopback only (127.0.0.1). wrk and the server share the machine's $(nproc) cores."
    echo "- Files: 1k.bin (1024 B), 10k.bin (10240 B), 100k.bin (102400 B), random bytes."
    echo "- nginx: 1 worker, sendfile, tcp_nopush, open_file_cache, access log on (combined,"
    echo "  to a file), keepalive_timeout 75s, keepalive_requests 1000. Config: nginx.conf (\$TMP = temp dir)."
    echo "- stoa: \`stoa serve --listen 127.0.0.1:0 ${STOA_ARGS[*]/#$BENCH_TMP/\$TMP}\`"
    echo "  (access log on, combined format, to a file)."
    echo "- Load: \`wrk -t$THREADS -c$CONNS -d${DURATION}s --latency URL\`, plus \`-H 'Connection: close'\` for the close rows."
    echo "- $ROUNDS rounds; in each round every row runs against both servers back to back;"
    echo "  nginx goes first in odd rounds, stoa in even ones. 2 s warm-up per server and file first."
    echo "- Access logs are truncated after every run (the servers keep logging)."
    readme_background
    readme_section Files
    echo "- raw.csv: round,row,server,req_per_sec,transfer (bytes/s),errors (socket errors + non-2xx/3xx),"
    echo "  other_cpu_pct (% of all CPU used by processes other than wrk and the servers during the run)"
    echo "- summary.txt: medians over rounds and the per-round ratio stoa/nginx (median, min, max)"
    echo "- wrk.log: every wrk output"
    readme_summary
} >"$OUT/README.md"
results_done
