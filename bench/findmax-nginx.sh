#!/usr/bin/env bash
# `stoa bench web --find-max --static-only` against stoa serve and nginx, each
# with one worker, on the same file set: the most conforming 400 kbit/s
# connections each sustains on this machine.
#
#   bench/findmax-nginx.sh [--start N] [--run-time SECS] [--limit N]
#                          [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#
# Each server is pinned to the same CPU(s) (default 0) and the harness to the
# others (default: the rest), so the two never compete for a core; after each
# trial the harness's share of its own cores is checked, and a trial over 70 %
# is marked harness-bound, never taken as the server's score (--no-pin: all
# share the machine, as before).
#
# The file set is written for the largest load the search may reach (it grows
# with the load, 4.88 MB per directory), in a temp directory. Results (both
# reports, summary) go to bench-results/<date>-<host>-findmax/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

START=200
RUN_TIME=60
LIMIT_CONNS=6400
PIN=1
SERVER_CPUS=""
HARNESS_CPUS=""
bench_cmdline "$@"
parse_args "--start=START --run-time=RUN_TIME --limit=LIMIT_CONNS --server-cpus=SERVER_CPUS
    --harness-cpus=HARNESS_CPUS --no-pin=PIN=0" "$@"

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git taskset:util-linux vmstat:procps
bench_setup
wide_port_range
bench_begin findmax

# The open-file limit is per process: the harness holds one descriptor per
# connection, each server one per connection plus the files it has open. stoa's
# open-file cache keeps up to CACHE_DESCRIPTORS descriptors (default 10,000), so it
# is sized to leave the connections room; nginx (no open_file_cache) holds a
# file only while sending it. The search goes no higher than what fits.
LIMIT="$(ulimit -n)"
CACHE_DESCRIPTORS=4000
MAX_CONNS=$((LIMIT - CACHE_DESCRIPTORS - 200))
((MAX_CONNS < LIMIT_CONNS)) || MAX_CONNS="$LIMIT_CONNS"
((MAX_CONNS >= START)) || die "open-file limit $LIMIT leaves room for $MAX_CONNS connections, below --start $START"
printf '[web.cache]\nmax_open_files = %d\n' "$CACHE_DESCRIPTORS" >"$BENCH_TMP/stoa.toml"
DOCROOT="$BENCH_TMP/www"
log "writing the file set for up to $MAX_CONNS connections"
"$STOA_BIN" fileset --connections "$MAX_CONNS" --dir "$DOCROOT" | tee "$OUT/fileset.txt"
# A file set larger than the page cache can hold is read from disk in part: say so.
FILESET_MB="$(sed -n 's/^Fileset Size (MB): *\([0-9]*\).*/\1/p' "$OUT/fileset.txt")"
MEM_MB=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))
FILESET_NOTE="the file set (${FILESET_MB} MB) fits in memory (${MEM_MB} MB)"
if ((FILESET_MB > MEM_MB * 8 / 10)); then
    FILESET_NOTE="the file set (${FILESET_MB} MB) is larger than 80 % of memory (${MEM_MB} MB): the largest loads read part of it from disk (vmstat.log: bi, wa)"
    log "warning: $FILESET_NOTE"
fi
# Disk reads and I/O wait over the searches, every 10 s.
vmstat -t 10 >"$OUT/vmstat.log" 2>&1 &
VMSTAT_PID=$!
stop_vmstat() { kill "$VMSTAT_PID" 2>/dev/null || true; }
bench_on_exit stop_vmstat

start_stoa "$BENCH_TMP/stoa-stderr.log" --config "$BENCH_TMP/stoa.toml" --docroot "$DOCROOT" --workers 1 --access-log off \
    --keepalive-timeout 75s --max-connections "$LIMIT"
STOA_ADDR="127.0.0.1:$STOA_PORT"
nginx_up "$BENCH_TMP/nginx" "$DOCROOT" 75s "$LIMIT" off "worker_rlimit_nofile $LIMIT;"
log "stoa on $STOA_ADDR, nginx on 127.0.0.1:$NGINX_PORT"
default_pinning
mapfile -t NGINX_WORKERS < <(nginx_workers "$NGINX_PID")
if ((PIN)); then
    pin_tree "$SERVER_CPUS" "$STOA_PID"
    pin_tree "$SERVER_CPUS" "$NGINX_PID"
fi
mapfile -t PIN_ARGS < <(harness_pin_args)

for server in stoa nginx; do
    if [[ $server == stoa ]]; then
        url="http://$STOA_ADDR"
        pids=(--server-pid "$STOA_PID")
    else
        url="http://127.0.0.1:$NGINX_PORT"
        pids=()
        for p in "${NGINX_WORKERS[@]}"; do pids+=(--server-pid "$p"); done
    fi
    log "find-max against $server"
    "$STOA_BIN" bench web --target "$url" --static-only --find-max --find-max-limit "$MAX_CONNS" --connections "$START" \
        --run-time "${RUN_TIME}s" "${PIN_ARGS[@]}" "${pids[@]}" --out "$RUN_DIR/$server" \
        >"$RUN_DIR/$server.txt" 2>"$RUN_DIR/$server.log" ||
        die "harness failed against $server: $(tail -n 3 "$RUN_DIR/$server.log")"
done

python3 "$BENCH_DIR/lib/findmax_summary.py" find-max stoa="$RUN_DIR/stoa" nginx="$RUN_DIR/nginx" | tee "$OUT/summary.txt"
{
    readme_header "find-max, static-only: stoa vs nginx (1 worker each)" Command
    readme_section Setup
    echo "- File set for $MAX_CONNS connections; both servers serve the same directory, access log off."
    echo "- Memory: $FILESET_NOTE."
    echo "- Open-file limit $LIMIT per process; stoa's open-file cache holds up to $CACHE_DESCRIPTORS descriptors"
    echo "  (\`web.cache.max_open_files\`, default 10,000) so its connections fit beside them; nginx has no open_file_cache."
    echo "- \`stoa bench web --static-only --find-max --connections $START --run-time ${RUN_TIME}s\` against each;"
    echo "  the harness runs on one thread; \`--server-pid\` gives each trial's server CPU (nginx: its worker)."
    pinning_readme
    echo "- A trial passes when every connection is valid and at least 95 % conform (320 kbit/s)."
    readme_summary
} >"$OUT/README.md"
results_done
