#!/usr/bin/env bash
# Cross-checks the harness's throughput against wrk on the same requests: a
# closed-loop static mix (no pacing, every connection kept alive) from
# `stoa bench web --closed-loop --static-only`, and wrk cycling through the same
# URLs (the generators' decks, from `stoa bench web --print-urls`), against one
# `stoa serve`, interleaved rounds.
#
#   bench/crosscheck-wrk.sh [--rounds N] [--duration SECS] [--connections C]
#
# The ratio is harness ops/s / wrk req/s per round; the issue's target is within
# 5 % (0.95–1.05). Results go to bench-results/<date>-<host>-crosscheck/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
DURATION=10
CONNS=16
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --duration=DURATION --connections=CONNS" "$@"

ensure_commands wrk:wrk python3:python3 timeout:coreutils git:git
bench_setup
bench_begin crosscheck

DOCROOT="$BENCH_TMP/www"
"$STOA_BIN" fileset --connections "$CONNS" --dir "$DOCROOT" >/dev/null
start_stoa "$BENCH_TMP/stderr.log" --docroot "$DOCROOT" --workers 2 --access-log off --keepalive-timeout 75s
MEASURE_PIDS=("$STOA_PID")
PORT_ONE="$STOA_PORT"
log "stoa (pid $STOA_PID) on 127.0.0.1:$PORT_ONE"

"$STOA_BIN" bench web --print-urls --static-only --connections "$CONNS" >"$BENCH_TMP/urls.txt"
cat >"$BENCH_TMP/urls.lua" <<LUA
local urls = {}
for line in io.lines("$BENCH_TMP/urls.txt") do urls[#urls + 1] = line end
local i = 0
request = function()
  i = i % #urls + 1
  return wrk.format("GET", urls[i])
end
LUA

new_raw_csv "round,tool,ops_per_sec"
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" harness wrk
    for tool in "${ORDER[@]}"; do
        if [[ "$tool" == wrk ]]; then
            WRK_EXTRA=(-s "$BENCH_TMP/urls.lua")
            run_wrk "$BENCH_TMP/wrk.txt" "$DURATION" 1 "$CONNS" "http://127.0.0.1:$PORT_ONE/"
            ((WRK_ERRORS == 0)) || die "wrk errors: $WRK_ERR_DETAIL"
            ops="$WRK_RPS"
        else
            "$STOA_BIN" bench web --target "http://127.0.0.1:$PORT_ONE" --static-only --closed-loop \
                --connections "$CONNS" --run-time "${DURATION}s" --out "$BENCH_TMP/h" >/dev/null 2>"$BENCH_TMP/h.err" ||
                die "harness failed: $(tail -n 3 "$BENCH_TMP/h.err")"
            ops="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); it=d["iterations"][0]; assert not it["errors"], it["errors"]; print(it["ops_per_sec"])' "$BENCH_TMP/h/report.json")"
        fi
        echo "$r,$tool,$ops" >>"$RAW"
        log "round $r $tool: $ops ops/s"
    done
done
check_background "after the run"

python3 - "$RAW" <<'PY' | tee "$OUT/summary.txt"
import csv, statistics, sys
by = {}
for r in csv.DictReader(open(sys.argv[1])):
    by.setdefault(int(r["round"]), {})[r["tool"]] = float(r["ops_per_sec"])
ratios = [v["harness"] / v["wrk"] for v in by.values()]
h = statistics.median(v["harness"] for v in by.values())
w = statistics.median(v["wrk"] for v in by.values())
print("closed-loop static mix, same URLs: harness ops/s vs wrk req/s\n")
print(f"harness median {h:.0f} ops/s, wrk median {w:.0f} req/s")
print(f"ratio harness/wrk: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
PY
{
    readme_header "Harness throughput cross-checked against wrk"
    readme_section Setup
    echo "- \`stoa serve --workers 2 --access-log off\` over \`stoa fileset --connections $CONNS\`, loopback."
    echo "- Harness: \`stoa bench web --static-only --closed-loop --connections $CONNS --run-time ${DURATION}s\`"
    echo "  (no pacing sleep, every connection kept alive, every response checked)."
    echo "- wrk: \`wrk -t1 -c$CONNS -d${DURATION}s\` cycling through the same URLs (\`--print-urls\`)."
    echo "- $ROUNDS rounds, order alternating."
    readme_background
    readme_summary
} >"$OUT/README.md"
results_done
