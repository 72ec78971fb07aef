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
CMDLINE="bench/compare-static.sh"
for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
    case "$1" in
        --rounds) ROUNDS="${2:?}"; shift 2 ;;
        --duration) DURATION="${2:?}"; shift 2 ;;
        --threads) THREADS="${2:?}"; shift 2 ;;
        --connections) CONNS="${2:?}"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
for v in "$ROUNDS" "$DURATION" "$THREADS" "$CONNS"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "rounds, duration, threads and connections must be positive integers"
done

ensure_commands nginx:nginx wrk:wrk python3:python3 timeout:coreutils git:git
bench_install_traps
make_tmp
build_stoa
raise_nofile 65536

OUT="$(result_dir static)"
wait_idle
check_background "before the run"
DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"

NGINX_DIR="$BENCH_TMP/nginx"
NGINX_PORT="$(free_port)"
NGINX_LOG="$BENCH_TMP/nginx-access.log"
mkdir -p "$NGINX_DIR"
write_nginx_conf "$NGINX_DIR" "$NGINX_PORT" "$DOCROOT" 75s 4096 "$NGINX_LOG"
start_nginx "$NGINX_DIR" "$NGINX_PORT"
log "nginx (master $NGINX_PID) on 127.0.0.1:$NGINX_PORT"

STOA_LOG="$BENCH_TMP/stoa-access.log"
STOA_ARGS=(--docroot "$DOCROOT" --workers 1 --access-log "$STOA_LOG" --log-format combined --keepalive-timeout 75s)
start_stoa "$BENCH_TMP/stoa-stderr.log" "${STOA_ARGS[@]}"
log "stoa (pid $STOA_PID) on 127.0.0.1:$STOA_PORT"

MEASURE_PIDS=("$NGINX_PID" "$(nginx_workers "$NGINX_PID")" "$STOA_PID")
check_fetch "$NGINX_PORT" "$DOCROOT" nginx
check_fetch "$STOA_PORT" "$DOCROOT" stoa

declare -A PORT=([nginx]="$NGINX_PORT" [stoa]="$STOA_PORT")
declare -A PID=([nginx]="$NGINX_PID" [stoa]="$STOA_PID")
declare -A ACCESS_LOG=([nginx]="$NGINX_LOG" [stoa]="$STOA_LOG")

check_alive() {
    local s
    for s in nginx stoa; do
        kill -0 "${PID[$s]}" 2>/dev/null || die "$s (pid ${PID[$s]}) died"
    done
}
after_run() {
    : >"${ACCESS_LOG[$1]}" # keep the disk bounded; both logs stay open and on
    check_alive
}

WRKLOG="$OUT/wrk.log"
: >"$WRKLOG"
log "warm-up: 2 s of wrk per server and file"
for s in nginx stoa; do
    for f in 1k 10k 100k; do
        run_wrk "$BENCH_TMP/warmup.txt" 2 "$THREADS" "$CONNS" "http://127.0.0.1:${PORT[$s]}/$f.bin"
    done
done
sleep 1 # let buffered access-log lines reach the files
for s in nginx stoa; do
    [[ -s "${ACCESS_LOG[$s]}" ]] || die "$s wrote no access-log lines during the warm-up"
    log "$s access log after warm-up: $(wc -l <"${ACCESS_LOG[$s]}") lines; sample: $(tail -n 1 "${ACCESS_LOG[$s]}")"
    : >"${ACCESS_LOG[$s]}"
done
check_alive

ROWS=(1k-keepalive 1k-close 10k-keepalive 10k-close 100k-keepalive 100k-close)
RAW="$OUT/raw.csv"
echo "round,row,server,req_per_sec,transfer,errors,other_cpu_pct" >"$RAW"
total=$((ROUNDS * ${#ROWS[@]} * 2 * DURATION))
log "running $ROUNDS rounds x ${#ROWS[@]} rows x 2 servers x ${DURATION}s (~$((total / 60 + 1)) min)"
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    if ((r % 2)); then order=(nginx stoa); else order=(stoa nginx); fi
    for row in "${ROWS[@]}"; do
        file="${row%%-*}"
        mode="${row#*-}"
        measure_row "$r" "$row" "/$file.bin" "$mode" "$CONNS" "${order[@]}"
    done
done

check_background "after the run (servers idle)"

python3 "$BENCH_DIR/summarize.py" "$RAW" nginx stoa | tee "$OUT/summary.txt"
cp "$NGINX_DIR/nginx.conf" "$OUT/nginx.conf"
sed -i "s#$BENCH_TMP#\$TMP#g" "$OUT/nginx.conf"

{
    echo "# Static files: stoa vs nginx"
    echo
    echo "Command (from the repository root): \`$CMDLINE\`"
    echo
    echo "Date: $(date -Is)"
    echo
    echo "## Machine"
    echo
    describe_machine
    echo
    echo "## Setup"
    echo
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
    echo
    echo "## Background load"
    echo
    describe_background
    echo
    echo "## Files"
    echo
    echo "- raw.csv: round,row,server,req_per_sec,transfer (bytes/s),errors (socket errors + non-2xx/3xx),"
    echo "  other_cpu_pct (% of all CPU used by processes other than wrk and the servers during the run)"
    echo "- summary.txt: medians over rounds and the per-round ratio stoa/nginx (median, min, max)"
    echo "- wrk.log: every wrk output"
    echo
    echo "## Summary"
    echo
    echo '```'
    cat "$OUT/summary.txt"
    echo '```'
} >"$OUT/README.md"

log "results in ${OUT#"$REPO_ROOT"/}"
