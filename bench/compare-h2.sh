#!/usr/bin/env bash
# Stoa vs nginx over HTTP/2 (TLS, ALPN h2), one worker each, the same ECDSA P-256
# certificate, access log off, interleaved rounds, h2load (nghttp2-client):
#
#   - `h2load -c 100 -m 10` for 1 KiB and 10 KiB files: 100 connections, 10
#     streams in flight on each, requests per second over DURATION seconds;
#   - full handshakes with ALPN h2: batches of `h2load -c 50 -n 50 -m 1` (50 new
#     connections, one request each, no resumption) for DURATION seconds,
#     connections per second.
#
#   bench/compare-h2.sh [--rounds 5] [--duration SECS] [--server-cpus LIST] [--no-pin]
#
# Each server is pinned to the same CPU (default 0) and h2load to the others,
# as in bench/findmax-nginx.sh. Each row's server CPU per request (the server
# process's utime + stime over the run) is in raw.csv beside the rate.
# Results go to bench-results/<date>-<host>-h2/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=5
DURATION=10
CONNS=100
STREAMS=10
HANDSHAKE_BATCH=50
PIN=1
SERVER_CPUS=""
HARNESS_CPUS=""
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --duration=DURATION --server-cpus=SERVER_CPUS --harness-cpus=HARNESS_CPUS
    --no-pin=PIN=0" "$@"
require_positive "--rounds and --duration take positive integers" "$ROUNDS" "$DURATION"
((ROUNDS <= 20 && DURATION <= 120)) || die "at most 20 rounds of 120 s"

ensure_commands nginx:nginx h2load:nghttp2-client openssl:openssl python3:python3 timeout:coreutils \
    taskset:util-linux
bench_setup
bench_begin h2

DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"
make_tls_pair "$BENCH_TMP"
LIMIT="$(ulimit -n)"
NGINX_DIR="$BENCH_TMP/nginx"
NGINX_PORT="$(free_port)"
# nginx's defaults for HTTP/2 are kept (128 streams, as stoa's h2_max_streams).
# `listen ... http2` rather than `http2 on`, which nginx has only since 1.25.1
# (Debian 12 ships 1.22); newer ones accept it with a deprecation warning.
write_nginx_tls_conf "$NGINX_DIR" "$NGINX_PORT" "$DOCROOT" "ssl http2" "ssl_session_cache shared:SSL:20m;"
# keepalive_requests (1000) also bounds the streams of an HTTP/2 connection in
# nginx; h2load does not reconnect in a timed run (-D), so each connection would
# stop at its thousandth request. Stoa has no such bound on HTTP/2 streams.
sed -i "s|keepalive_requests 1000;|keepalive_requests 1000000;|" "$NGINX_DIR/nginx.conf"
start_nginx "$NGINX_DIR" "$NGINX_PORT"
log "nginx (master $NGINX_PID) on https://127.0.0.1:$NGINX_PORT"

start_stoa_with "$BENCH_TMP/stoa-stderr.log" "https" serve --docroot "$DOCROOT" \
    --workers 1 --access-log off --keepalive-timeout 75s --max-connections "$LIMIT" \
    --tls-listen 127.0.0.1:0 --tls-cert "$CERT" --tls-key "$KEY"
log "stoa (pid $STOA_PID) on https://127.0.0.1:${STOA_PORTS[https]}"

SERVERS=(nginx stoa)
NGINX_WORKER="$(nginx_workers "$NGINX_PID")"
declare -A PORT=([nginx]="$NGINX_PORT" [stoa]="${STOA_PORTS[https]}")
declare -A PID=([nginx]="$NGINX_PID" [stoa]="$STOA_PID")
# The process whose CPU is the server's: nginx's worker, stoa itself.
declare -A WORKER=([nginx]="$NGINX_WORKER" [stoa]="$STOA_PID")
for s in "${SERVERS[@]}"; do
    for f in 1k 10k; do
        curl -sf --http2 --cacert "$CERT" "https://localhost:${PORT[$s]}/$f.bin" \
            --resolve "localhost:${PORT[$s]}:127.0.0.1" | cmp -s - "$DOCROOT/$f.bin" ||
            die "$s: /$f.bin over HTTP/2 differs from the file"
    done
    curl -sf --http2 --cacert "$CERT" -o /dev/null -w "$s: %{http_version}\n" \
        --resolve "localhost:${PORT[$s]}:127.0.0.1" "https://localhost:${PORT[$s]}/1k.bin" >>"$OUT/negotiated.txt"
done
grep -q ': 2$' "$OUT/negotiated.txt" || die "HTTP/2 was not negotiated: $(cat "$OUT/negotiated.txt")"

default_pinning
if ((PIN)); then
    pin_tree "$SERVER_CPUS" "$STOA_PID"
    pin_tree "$SERVER_CPUS" "$NGINX_PID"
fi
# h2load under a wrapper that appends its CPU use (% of one core over its run) to
# $BENCH_TMP/harness-cpu.txt: a row where it ran near 100 % of its one thread is
# the harness's limit, not the server's.
H2LOAD=(python3 -c 'import resource, subprocess, sys, time
t = time.monotonic(); subprocess.run(sys.argv[2:]); wall = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "a").write("%.0f\n" % (100 * (r.ru_utime + r.ru_stime) / wall))' "$BENCH_TMP/harness-cpu.txt")
((PIN)) && H2LOAD+=(taskset -c "$HARNESS_CPUS")
H2LOAD+=(h2load)

# h2load_rate SERVER FILE -> H2_RPS (requests/s), H2_FAILED, H2_CPU_US (server µs
# of CPU per request), H2_HARNESS (h2load's CPU, % of one core).
h2load_rate() {
    local s="$1" f="$2" out="$BENCH_TMP/h2load.txt" before after
    before="$(proc_ticks "${WORKER[$s]}")"
    : >"$BENCH_TMP/harness-cpu.txt"
    timeout $((DURATION + 30)) "${H2LOAD[@]}" -c "$CONNS" -m "$STREAMS" -t 1 -D "$DURATION" \
        --warm-up-time 1 "https://127.0.0.1:${PORT[$s]}/$f.bin" >"$out" 2>&1 || true
    after="$(proc_ticks "${WORKER[$s]}")"
    cat "$out" >>"$OUT/h2load.log"
    H2_HARNESS="$(tail -n 1 "$BENCH_TMP/harness-cpu.txt")"
    H2_RPS="$(grep -m1 -oE 'finished in [0-9.]+s, [0-9.]+ req/s' "$out" | awk '{print int($4)}')"
    H2_FAILED="$(grep -m1 -oE '[0-9]+ failed' "$out" | cut -d' ' -f1)"
    local done_
    done_="$(grep -m1 -oE '[0-9]+ done' "$out" | cut -d' ' -f1)"
    H2_CPU_US="$(python3 -c "import os; t=os.sysconf('SC_CLK_TCK'); d=int('$done_' or 0); \
print(round(($after - $before) / t * 1e6 / d, 1) if d else 0)")"
}

# handshake_rate SERVER -> HS_RATE (new connections/s with ALPN h2), HS_CPU_US.
handshake_rate() {
    local s="$1" out="$BENCH_TMP/hs.txt" start end n=0 before after
    before="$(proc_ticks "${WORKER[$s]}")"
    start="$(date +%s.%N)"
    end=$((SECONDS + DURATION))
    while ((SECONDS < end)); do
        "${H2LOAD[@]}" -c "$HANDSHAKE_BATCH" -n "$HANDSHAKE_BATCH" -m 1 -t 1 \
            "https://127.0.0.1:${PORT[$s]}/1k.bin" >"$out" 2>&1 || true
        n=$((n + $(grep -m1 -oE '[0-9]+ succeeded' "$out" | cut -d' ' -f1)))
        grep -q 'Application protocol: h2' "$out" || die "$s: h2load did not negotiate h2: $(tail -n 3 "$out")"
    done
    after="$(proc_ticks "${WORKER[$s]}")"
    HS_RATE="$(python3 -c "print(int($n / ($(date +%s.%N) - $start)))")"
    HS_CPU_US="$(python3 -c "import os; t=os.sysconf('SC_CLK_TCK'); print(round(($after - $before) / t * 1e6 / $n, 1) if $n else 0)")"
}

new_raw_csv
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${SERVERS[@]}"
    for f in 1k 10k; do
        for s in "${ORDER[@]}"; do
            h2load_rate "$s" "$f"
            log "round $r h2-$f $s: $H2_RPS req/s, $H2_FAILED failed, server $H2_CPU_US µs/request, h2load at $H2_HARNESS % of its core"
            echo "$r,h2-$f-c$CONNS-m$STREAMS,$s,$H2_RPS,0,$H2_FAILED,0,$H2_CPU_US,$H2_HARNESS" >>"$RAW"
            servers_alive
        done
    done
    for s in "${ORDER[@]}"; do
        handshake_rate "$s"
        log "round $r handshake-h2 $s: $HS_RATE/s, server $HS_CPU_US µs/connection"
        echo "$r,handshake-h2,$s,$HS_RATE,0,0,0,$HS_CPU_US," >>"$RAW"
        servers_alive
    done
done
check_background "after the rounds (servers idle)"
python3 "$BENCH_DIR/summarize.py" "$RAW" nginx stoa | tee "$OUT/summary.txt"
save_config "$NGINX_DIR/nginx.conf" "$OUT/nginx.conf"
{
    readme_header "HTTP/2 over TLS: stoa vs nginx" Command
    echo "- OpenSSL: $(openssl version); h2load: $(h2load --version 2>&1 | head -n 1)"
    readme_section Setup
    echo "- Both servers: 1 worker, access log off, the same ECDSA P-256 certificate, TLS 1.2 and 1.3,"
    echo "  HTTP/2 by ALPN (nginx: \`listen ... ssl http2\` with its defaults, and \`keepalive_requests 1000000\`,"
    echo "  since nginx's 1000 also ends an HTTP/2 connection after 1000 streams and h2load does not reconnect;"
    echo "  stoa: its defaults). Negotiated with curl:"
    echo
    echo '```'
    cat "$OUT/negotiated.txt"
    echo '```'
    echo
    echo "- Rows \`h2-*\`: \`h2load -c $CONNS -m $STREAMS -t 1 -D $DURATION --warm-up-time 1\`, $ROUNDS interleaved rounds."
    echo "- \`handshake-h2\`: batches of \`h2load -c $HANDSHAKE_BATCH -n $HANDSHAKE_BATCH -m 1\` (each connection a full"
    echo "  handshake with ALPN h2 and one 1 KiB request) for $DURATION s: new connections per second."
    echo "- raw.csv's last columns: the server's CPU (utime + stime of nginx's worker, of stoa) per request or"
    echo "  connection over the row, and h2load's CPU in % of its one thread's core: near 100 % the row measured"
    echo "  h2load, and its rate is a lower bound for both servers, not their ratio."
    if ((PIN)); then
        echo "- Pinned: each server (all its threads, \`taskset -a -c -p\`) on CPU(s) $SERVER_CPUS, h2load on $HARNESS_CPUS."
    else
        echo "- Not pinned: h2load and the servers share the machine's CPUs."
    fi
    describe_background
    readme_summary "Summary (ratio = stoa/nginx)"
} >"$OUT/README.md"
results_done
