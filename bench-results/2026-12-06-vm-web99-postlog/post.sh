#!/usr/bin/env bash
# post.sh BIN LABEL CONNS SECS: CPU of stoa's web99-state thread per POST under the
# paced SPECweb99 mix. WWW and CGI: a file set (`stoa fileset`); STOA: the stoa that
# runs the harness (default target/release/stoa). Results in /tmp/post-LABEL.
set -euo pipefail
BIN=$1 LABEL=$2 N=$3 T=$4
STOA=${STOA:-target/release/stoa}
W=/tmp/post-$LABEL; rm -rf "$W"; mkdir -p "$W"
ulimit -n 20000
taskset -c 0 "$BIN" serve --listen 127.0.0.1:0 --docroot "$WWW" --workers 1 --access-log "$W/access.log" \
    --log-format combined --keepalive-timeout 75s --max-connections 19000 --web99 --web99-state "$W/state" \
    --cgi-dir "$CGI" 2>"$W/stderr" &
PID=$!
for _ in $(seq 100); do
    PORT=$(grep -o '127.0.0.1:[0-9]*' "$W/stderr" | head -1 | cut -d: -f2) && [[ -n $PORT ]] && break
    sleep 0.1
done
ticks() { local s; s=$(cat "$1"); s=${s##*) }; read -r -a a <<<"$s"; echo $((a[11] + a[12])); }
TID=$(for t in /proc/$PID/task/*; do [[ $(cat "$t/comm") == web99-state ]] && basename "$t"; done || true)
b=$(ticks "/proc/$PID/task/$TID/stat") pb=$(ticks "/proc/$PID/stat")
taskset -c 1 "$STOA" bench web --target "http://127.0.0.1:$PORT" --connections "$N" --run-time "${T}s" \
    --server-pid "$PID" --out "$W/rep" >"$W/rep.txt" 2>"$W/rep.log"
a=$(ticks "/proc/$PID/task/$TID/stat") pa=$(ticks "/proc/$PID/stat")
kill "$PID"; wait "$PID" || true
python3 - "$LABEL" "$b" "$a" "$pb" "$pa" "$W/rep/report.json" "$(getconf CLK_TCK)" <<'PY'
import json, sys
label, b, a, pb, pa, report, tck = sys.argv[1:]
it = json.load(open(report))["iterations"][0]
posts, ops = sum(it["posts_sent"]), it["harness"]["ops_all_phases"]
state, proc = (int(a) - int(b)) / int(tck) * 1e6, (int(pa) - int(pb)) / int(tck) * 1e6
print(f"{label}: posts={posts} state_us_per_post={state / posts:.1f} state_us_per_op={state / ops:.2f} "
      f"process_us_per_op={proc / ops:.1f} state_share={100 * state / proc:.1f}%")
PY
