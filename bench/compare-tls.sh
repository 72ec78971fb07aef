#!/usr/bin/env bash
# Stoa vs nginx (OpenSSL) over HTTPS, one worker each, the same ECDSA P-256
# certificate, TLS 1.2 and 1.3 offered, access log off, interleaved rounds:
#
#   - wrk keep-alive for 1, 10 and 100 KiB files;
#   - full-handshake rate: parallel `openssl s_time -new` (a new session each time);
#   - resumed-handshake rate: parallel `openssl s_time -reuse` (the first session
#     resumed; each fetch reads a page so TLS 1.3 tickets arrive);
#   - `stoa bench web --static-only --find-max` over HTTPS against each.
#
#   bench/compare-tls.sh [--rounds N] [--duration SECS] [--clients N] [--findmax-limit N] [--no-findmax]
#                        [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#
# For the find-max only, each server is pinned to the same CPU(s) (default 0)
# and the harness to the others, and a trial whose harness used more than 70 %
# of its cores is marked harness-bound (see bench/findmax-nginx.sh); the wrk
# and handshake rows run unpinned, as before.
#
# Results go to bench-results/<date>-<host>-tls/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=5
DURATION=5
THREADS=1
CONNS=64
CLIENTS=4
FINDMAX=1
FINDMAX_LIMIT=3200
FINDMAX_START=200
FINDMAX_RUN=30
PIN=1
SERVER_CPUS=""
HARNESS_CPUS=""
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --duration=DURATION --clients=CLIENTS --findmax-limit=FINDMAX_LIMIT
    --no-findmax=FINDMAX=0 --server-cpus=SERVER_CPUS --harness-cpus=HARNESS_CPUS --no-pin=PIN=0" "$@"

ensure_commands nginx:nginx wrk:wrk openssl:openssl python3:python3 timeout:coreutils git:git taskset:util-linux
bench_setup
wide_port_range
bench_begin tls

DOCROOT="$BENCH_TMP/www"
if ((FINDMAX)); then
    # First: `stoa fileset` writes only into an empty directory (or its own set).
    log "writing the file set for up to $FINDMAX_LIMIT connections"
    "$STOA_BIN" fileset --connections "$FINDMAX_LIMIT" --dir "$DOCROOT" >"$OUT/fileset.txt"
fi
make_docroot "$DOCROOT"

make_tls_pair "$BENCH_TMP"
LIMIT="$(ulimit -n)"
NGINX_DIR="$BENCH_TMP/nginx"
NGINX_PORT="$(free_port)"
write_nginx_tls_conf "$NGINX_DIR" "$NGINX_PORT" "$DOCROOT" ssl \
    "ssl_session_cache shared:SSL:20m;\n        ssl_session_tickets on;"
start_nginx "$NGINX_DIR" "$NGINX_PORT"
log "nginx (master $NGINX_PID) on https://127.0.0.1:$NGINX_PORT"

start_stoa_with "$BENCH_TMP/stoa-stderr.log" "http https" serve --listen 127.0.0.1:0 --docroot "$DOCROOT" \
    --workers 1 --access-log off --keepalive-timeout 75s --max-connections "$LIMIT" \
    --tls-listen 127.0.0.1:0 --tls-cert "$CERT" --tls-key "$KEY"
STOA_TLS_PORT="${STOA_PORTS[https]}"
log "stoa (pid $STOA_PID) on https://127.0.0.1:$STOA_TLS_PORT"

MEASURE_PIDS=("$NGINX_PID" "$(nginx_workers "$NGINX_PID")" "$STOA_PID")
SERVERS=(nginx stoa)
declare -A PORT=([nginx]="$NGINX_PORT" [stoa]="$STOA_TLS_PORT")
declare -A PID=([nginx]="$NGINX_PID" [stoa]="$STOA_PID")
SCHEME=https
for s in "${SERVERS[@]}"; do
    for f in 1k 10k 100k; do
        curl -sf --cacert "$CERT" "https://127.0.0.1:${PORT[$s]}/$f.bin" | cmp -s - "$DOCROOT/$f.bin" ||
            die "$s: /$f.bin over HTTPS differs from the file"
    done
    openssl s_client -connect "127.0.0.1:${PORT[$s]}" -servername localhost </dev/null 2>/dev/null |
        grep -m1 -E '^New,' | sed "s/^/$s: /" >>"$OUT/negotiated.txt"
done

after_run() { servers_alive; }

# handshakes SERVER MODE(-new|-reuse) -> sets HS_RATE (connections/s) and HS_RESUMED
# (% resumed), from CLIENTS parallel s_time processes.
handshakes() {
    local s="$1" mode="$2" i total=0 reused=0 files=() pids=() p
    for ((i = 0; i < CLIENTS; i++)); do
        files+=("$BENCH_TMP/stime-$i.txt")
        timeout $((DURATION + 30)) openssl s_time -connect "127.0.0.1:${PORT[$s]}" "$mode" -time "$DURATION" \
            -www /1k.bin >"${files[i]}" 2>&1 &
        pids+=("$!")
    done
    # Only these: a bare `wait` would also wait for the servers.
    for p in "${pids[@]}"; do wait "$p" || true; done
    for f in "${files[@]}"; do
        # "N connections in T real seconds" (T rounded to whole seconds, so the
        # rate divides by -time); one 'r' per resumed connection, '*' per new.
        total=$((total + $(grep -m1 -oE '^[0-9]+ connections in [0-9.]+ real' "$f" | cut -d' ' -f1 || echo 0)))
        reused=$((reused + $(grep -E '^[*r]+$' "$f" | tr -cd 'r' | wc -c)))
        grep -vE '^[*r]+$' "$f" >>"$OUT/s_time.log" || true
    done
    HS_RATE=$((total / DURATION))
    HS_RESUMED=$((total > 0 ? 100 * reused / total : 0))
}

WRKLOG="$OUT/wrk.log"
: >"$WRKLOG"
warm_up "$CONNS" 1k 10k 100k
servers_alive

new_raw_csv
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${SERVERS[@]}"
    for f in 1k 10k 100k; do
        measure_row "$r" "$f-keepalive" "/$f.bin" keepalive "$CONNS" "${ORDER[@]}"
    done
    for mode in new reuse; do
        for s in "${ORDER[@]}"; do
            handshakes "$s" "-$mode"
            log "round $r handshake-$mode $s: $HS_RATE/s ($HS_RESUMED % resumed)"
            echo "$r,handshake-$mode,$s,$HS_RATE,0,0,0,," >>"$RAW"
            echo "round $r handshake-$mode $s: $HS_RATE connections/s, $HS_RESUMED % resumed" >>"$OUT/handshakes.txt"
            servers_alive
        done
    done
done
check_background "after the rounds (servers idle)"
python3 "$BENCH_DIR/summarize.py" "$RAW" nginx stoa | tee "$OUT/summary.txt"

if ((FINDMAX)); then
    default_pinning
    if ((PIN)); then
        pin_tree "$SERVER_CPUS" "$STOA_PID"
        pin_tree "$SERVER_CPUS" "$NGINX_PID"
    fi
    mapfile -t PIN_ARGS < <(harness_pin_args)
    declare -A FM_PIDS=([stoa]="--server-pid $STOA_PID" [nginx]="$(printf -- '--server-pid %s ' $(nginx_workers "$NGINX_PID"))")
    for s in stoa nginx; do
        log "find-max over HTTPS against $s"
        # shellcheck disable=SC2086 # FM_PIDS holds flag words
        "$STOA_BIN" bench web --target "https://127.0.0.1:${PORT[$s]}" --tls-ca "$CERT" --static-only --find-max \
            --find-max-limit "$FINDMAX_LIMIT" --connections "$FINDMAX_START" --run-time "${FINDMAX_RUN}s" \
            "${PIN_ARGS[@]}" ${FM_PIDS[$s]} --out "$RUN_DIR/findmax-$s" >"$RUN_DIR/findmax-$s.txt" 2>"$RUN_DIR/findmax-$s.log" ||
            die "harness failed against $s: $(tail -n 3 "$RUN_DIR/findmax-$s.log")"
    done
    echo | tee -a "$OUT/summary.txt"
    python3 "$BENCH_DIR/lib/findmax_summary.py" "find-max HTTPS" stoa="$RUN_DIR/findmax-stoa" nginx="$RUN_DIR/findmax-nginx" |
        tee -a "$OUT/summary.txt"
fi
save_config "$NGINX_DIR/nginx.conf" "$OUT/nginx.conf"
{
    readme_header "HTTPS: stoa vs nginx (OpenSSL)" Command
    echo "- OpenSSL: $(openssl version)"
    readme_section Setup
    echo "- Both servers: 1 worker, access log off, the same ECDSA P-256 certificate, TLS 1.2 and 1.3 offered,"
    echo "  session cache and tickets on (nginx.conf here). Negotiated with \`openssl s_client\`:"
    echo
    echo '```'
    cat "$OUT/negotiated.txt"
    echo '```'
    echo
    echo "- Rows \`*-keepalive\`: \`wrk -t$THREADS -c$CONNS -d${DURATION}s\` over HTTPS, $ROUNDS interleaved rounds."
    echo "- \`handshake-new\` / \`handshake-reuse\`: $CLIENTS parallel \`openssl s_time -new|-reuse -time $DURATION -www /1k.bin\`,"
    echo "  connections per second (each fetches 1 KiB); \`-reuse\` resumes the first session (see handshakes.txt for"
    echo "  the share actually resumed)."
    echo "- find-max: \`stoa bench web --target https://… --static-only --find-max --connections $FINDMAX_START"
    echo "  --run-time ${FINDMAX_RUN}s --find-max-limit $FINDMAX_LIMIT\` (half the new connections may resume)."
    ((FINDMAX)) && pinning_readme
    describe_background
    readme_summary "Summary (ratio = stoa/nginx)"
} >"$OUT/README.md"
results_done
