#!/usr/bin/env bash
# `stoa bench web --find-max --static-only` against stoa serve and nginx, each
# with one worker, on the same file set: the most conforming 400 kbit/s
# connections each sustains on this machine (harness and server share it).
#
#   bench/findmax-nginx.sh [--start N] [--run-time SECS] [--limit N]
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
bench_cmdline "$@"
parse_args "--start=START --run-time=RUN_TIME --limit=LIMIT_CONNS" "$@"

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git
bench_setup
bench_begin findmax

# Enough directories for the search's doubling steps up to the descriptor limit.
LIMIT="$(ulimit -n)"
MAX_CONNS=$(( (LIMIT - 100) / 2 ))
((MAX_CONNS < LIMIT_CONNS)) || MAX_CONNS="$LIMIT_CONNS"
DOCROOT="$BENCH_TMP/www"
log "writing the file set for up to $MAX_CONNS connections"
"$STOA_BIN" fileset --connections "$MAX_CONNS" --dir "$DOCROOT" | tee "$OUT/fileset.txt"

start_stoa "$BENCH_TMP/stoa-stderr.log" --docroot "$DOCROOT" --workers 1 --access-log off \
    --keepalive-timeout 75s --max-connections "$LIMIT"
STOA_ADDR="127.0.0.1:$STOA_PORT"
nginx_up "$BENCH_TMP/nginx" "$DOCROOT" 75s "$LIMIT" off "worker_rlimit_nofile $LIMIT;"
log "stoa on $STOA_ADDR, nginx on 127.0.0.1:$NGINX_PORT"

for server in stoa nginx; do
    if [[ $server == stoa ]]; then url="http://$STOA_ADDR"; else url="http://127.0.0.1:$NGINX_PORT"; fi
    log "find-max against $server"
    "$STOA_BIN" bench web --target "$url" --static-only --find-max --find-max-limit "$MAX_CONNS" --connections "$START" \
        --run-time "${RUN_TIME}s" --out "$OUT/$server" >"$OUT/$server.txt" 2>"$OUT/$server.log" ||
        die "harness failed against $server: $(tail -n 3 "$OUT/$server.log")"
done

python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
score = {}
for s in ("stoa", "nginx"):
    d = json.load(open(f"{out}/{s}/report.json"))
    score[s] = d["score"] or 0
    trials = ", ".join(f"{t['connections']}:{'ok' if t['passed'] else 'fail'}" for t in d["find_max"])
    print(f"{s:6} most conforming connections: {score[s]:6}   trials {trials}")
print(f"\nratio stoa/nginx: {score['stoa'] / score['nginx']:.3f}" if score["nginx"] else "\nnginx: no passing trial")
PY
{
    readme_header "find-max, static-only: stoa vs nginx (1 worker each)" Command
    readme_section Setup
    echo "- File set for $MAX_CONNS connections; both servers serve the same directory, access log off."
    echo "- \`stoa bench web --static-only --find-max --connections $START --run-time ${RUN_TIME}s\` against each;"
    echo "  the harness runs on one thread and shares the machine with the server."
    echo "- A trial passes when every connection is valid and at least 95 % conform (320 kbit/s)."
    readme_summary
} >"$OUT/README.md"
results_done
