#!/usr/bin/env bash
# Stoa's event-loop model: --runtime per-core vs --runtime multi-thread, both
# --workers 2, interleaved rounds of wrk over loopback.
#
#   bench/compare-runtime.sh [--rounds N] [--duration SECS] [--threads T]
#                            [--connections 64,256] [--access-log on|off]
#
# Rows: {1k,100k} x {keep-alive, close} x each connection count. The ratio is
# per-core/multi-thread. Results go to bench-results/<date>-<host>-runtime/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=5
DURATION=5
THREADS=1
CONN_LIST="64,256"
ACCESS_LOG=on
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --duration=DURATION --threads=THREADS --connections=CONN_LIST --access-log=ACCESS_LOG" "$@"
require_positive "rounds, duration and threads must be positive integers" "$ROUNDS" "$DURATION" "$THREADS"
IFS=',' read -r -a CONNS_ARR <<<"$CONN_LIST"
require_positive "--connections takes a comma-separated list of positive integers" "${CONNS_ARR[@]}"
[[ "$ACCESS_LOG" == on || "$ACCESS_LOG" == off ]] || die "--access-log is on or off"

ensure_commands wrk:wrk python3:python3 timeout:coreutils git:git
bench_setup
bench_begin runtime
DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"

SERVERS=(per-core multi-thread)
declare -A PORT PID ALOG
for s in "${SERVERS[@]}"; do
    if [[ "$ACCESS_LOG" == on ]]; then ALOG[$s]="$BENCH_TMP/$s-access.log"; else ALOG[$s]=off; fi
    start_stoa "$BENCH_TMP/$s-stderr.log" --docroot "$DOCROOT" --workers 2 --runtime "$s" \
        --access-log "${ALOG[$s]}" --log-format combined --keepalive-timeout 75s
    PORT[$s]="$STOA_PORT"
    PID[$s]="$STOA_PID"
    log "stoa --runtime $s (pid $STOA_PID) on 127.0.0.1:$STOA_PORT"
    check_fetch "$STOA_PORT" "$DOCROOT" "stoa-$s"
done

MEASURE_PIDS=("${PID[@]}")

truncate_logs() {
    local s
    for s in "${SERVERS[@]}"; do
        [[ "${ALOG[$s]}" == off ]] || : >"${ALOG[$s]}"
    done
}
after_run() {
    truncate_logs
    servers_alive "stoa --runtime"
}

warm_up "${CONNS_ARR[0]}" 1k 100k
truncate_logs
servers_alive "stoa --runtime"

ROWS=()
for c in "${CONNS_ARR[@]}"; do
    for f in 1k 100k; do
        ROWS+=("$f-keepalive-c$c" "$f-close-c$c")
    done
done

WRKLOG="$OUT/wrk.log"
: >"$WRKLOG"
new_raw_csv
announce_rounds
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${SERVERS[@]}"
    for row in "${ROWS[@]}"; do
        IFS=- read -r file mode conns <<<"$row"
        conns="${conns#c}"
        measure_row "$r" "$row" "/$file.bin" "$mode" "$conns" "${ORDER[@]}"
    done
done

check_background "after the run (servers idle)"

python3 "$BENCH_DIR/summarize.py" "$RAW" multi-thread per-core | tee "$OUT/summary.txt"

{
    readme_header "Stoa runtime model: per-core vs multi-thread"
    readme_section Setup
    echo "- Loopback only. wrk and the servers share the machine's $(nproc) cores."
    echo "- Both: \`stoa serve --listen 127.0.0.1:0 --workers 2 --runtime per-core|multi-thread"
    echo "  --access-log $([[ $ACCESS_LOG == on ]] && echo FILE || echo off) --log-format combined --keepalive-timeout 75s\`."
    echo "  Both processes stay up for the whole run; only one is under load at a time."
    echo "- Files: 1k.bin (1024 B) and 100k.bin (102400 B), random bytes."
    echo "- Load: \`wrk -t$THREADS -cC -d${DURATION}s --latency URL\` with C in {${CONN_LIST}}, plus"
    echo "  \`-H 'Connection: close'\` for the close rows."
    echo "- $ROUNDS rounds; in each round every row runs against both back to back; per-core goes first in"
    echo "  odd rounds, multi-thread in even ones. 2 s warm-up per server and file first."
    readme_background
    readme_section Files
    echo "- raw.csv: round,row,server,req_per_sec,transfer (bytes/s),errors (socket errors + non-2xx/3xx),"
    echo "  other_cpu_pct (% of all CPU used by processes other than wrk and the servers during the run)"
    echo "- summary.txt: medians over rounds and the per-round ratio per-core/multi-thread (median, min, max)"
    echo "- wrk.log: every wrk output"
    readme_summary
} >"$OUT/README.md"
results_done
