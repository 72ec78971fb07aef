#!/usr/bin/env bash
# What the harness costs: `stoa bench web --static-only` at several paced loads
# against stoa serve and nginx (one worker each, same file set), with the
# harness's CPU per operation beside the server's (`--server-pid`), each split
# into user and kernel time, the harness's share of its core, and the linear
# estimate of paced connections per harness core. One closed-loop row (64
# connections, no pacing) shows the cost per operation when the harness runs
# flat out, as wrk does.
#
#   bench/harness-cost.sh [--loads "1600 3200 6400"] [--run-time SECS] [--rounds 3]
#                         [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#                         [--profile-load N | --no-profile]
#
# Both servers are pinned to the same CPU(s) (default 0) and the harness to the
# others (default: the rest), so each one's CPU is its own; --no-pin lets them
# share. Rounds interleave the servers (the order alternates by round); the
# summary gives medians over the rounds and each ratio's range.
#
# Then one more run against stoa at --profile-load (default: the largest load)
# with the harness under `perf record -e cpu-clock -g` for 10 s of its steady
# phase: harness-profile.txt gives its user/kernel split, the share of its kernel
# time that is the server end's receive work (loopback charges it to the sender),
# and its kernel time by system call.
#
# Results go to bench-results/<date>-<host>-harness-cost/.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LOADS="1600 3200 6400"
RUN_TIME=30
ROUNDS=3
PIN=1
SERVER_CPUS=""
HARNESS_CPUS=""
PROFILE=1
PROFILE_LOAD=""
bench_cmdline "$@"
parse_args "--loads=LOADS --run-time=RUN_TIME --rounds=ROUNDS --server-cpus=SERVER_CPUS
    --harness-cpus=HARNESS_CPUS --no-pin=PIN=0 --profile-load=PROFILE_LOAD --no-profile=PROFILE=0" "$@"

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git taskset:util-linux
((PROFILE)) && ensure_commands perf:linux-perf
bench_setup
wide_port_range
((PROFILE)) && ensure_inferno
bench_begin harness-cost

LIMIT="$(ulimit -n)"
MAX=0
for n in $LOADS; do ((n > MAX)) && MAX=$n; done
PROFILE_LOAD="${PROFILE_LOAD:-$MAX}"
((MAX + 100 <= LIMIT)) || die "open-file limit $LIMIT too low for $MAX connections"
DOCROOT="$BENCH_TMP/www"
log "writing the file set for $MAX connections"
"$STOA_BIN" fileset --connections "$MAX" --dir "$DOCROOT" >"$OUT/fileset.txt"

start_stoa "$BENCH_TMP/stoa-stderr.log" --docroot "$DOCROOT" --workers 1 --access-log off \
    --keepalive-timeout 75s --max-connections "$LIMIT"
nginx_up "$BENCH_TMP/nginx" "$DOCROOT" 75s "$LIMIT" off "worker_rlimit_nofile $LIMIT;"
mapfile -t NGINX_WORKERS < <(nginx_workers "$NGINX_PID")
default_pinning
if ((PIN)); then
    pin_tree "$SERVER_CPUS" "$STOA_PID"
    pin_tree "$SERVER_CPUS" "$NGINX_PID"
fi
mapfile -t PIN_ARGS < <(harness_pin_args)

# user_sys PID...: "UTIME STIME" clock ticks summed over the PIDs.
user_sys() {
    local u=0 s=0 rest a pid
    for pid in "$@"; do
        rest="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${rest##*) }"
        read -r -a a <<<"$rest"
        u=$((u + a[11])) s=$((s + a[12]))
    done
    echo "$u $s"
}

run_one() { # server connections label extra-args...
    local server="$1" n="$2" label="$3" url pids=() spids=() before after
    shift 3
    if [[ $server == stoa ]]; then
        url="http://127.0.0.1:$STOA_PORT"
        spids=("$STOA_PID")
    else
        url="http://127.0.0.1:$NGINX_PORT"
        spids=("$NGINX_PID" "${NGINX_WORKERS[@]}")
    fi
    for p in "${spids[@]}"; do pids+=(--server-pid "$p"); done
    log "$server, $label"
    before="$(user_sys "${spids[@]}")"
    # The harness's own user and system time over the whole command.
    /usr/bin/time -f "%U %S" -o "$RUN_DIR/$server-$label.time" \
        "$STOA_BIN" bench web --target "$url" --static-only --connections "$n" --run-time "${RUN_TIME}s" \
        "${PIN_ARGS[@]}" "${pids[@]}" "$@" --out "$RUN_DIR/$server-$label" \
        >"$RUN_DIR/$server-$label.txt" 2>"$RUN_DIR/$server-$label.log" ||
        die "harness failed against $server: $(tail -n 3 "$RUN_DIR/$server-$label.log")"
    after="$(user_sys "${spids[@]}")"
    echo "$before $after $(getconf CLK_TCK)" >"$RUN_DIR/$server-$label.server-ticks"
}

for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order="stoa nginx"; else order="nginx stoa"; fi
    for n in $LOADS; do
        for server in $order; do run_one "$server" "$n" "$n-r$r"; done
    done
done
for server in stoa nginx; do run_one "$server" 64 closed-64 --closed-loop; done
check_background "after the runs (servers idle)"

# The harness under perf: the only process of the harness's run is `stoa bench web
# ... --out $RUN_DIR/stoa-profile-N`, found by that argument once it has started.
if ((PROFILE)); then
    label="profile-$PROFILE_LOAD"
    (
        sleep $((RUN_TIME / 3 + 5))
        harness="$(pgrep -n -f -- "--out $RUN_DIR/stoa-$label")" || exit 0
        perf record -q -e cpu-clock -F 999 -g -p "$harness" -o "$BENCH_TMP/harness.perf" -- sleep 10 >/dev/null 2>&1
    ) &
    profiler=$!
    run_one stoa "$PROFILE_LOAD" "$label"
    wait "$profiler"
    [[ -s $BENCH_TMP/harness.perf ]] || die "perf recorded nothing of the harness"
    perf script -i "$BENCH_TMP/harness.perf" 2>/dev/null | inferno-collapse-perf --all >"$BENCH_TMP/harness.folded"
    python3 "$BENCH_DIR/lib/folded_profile.py" "$BENCH_TMP/harness.folded" >"$OUT/harness-profile.txt"
fi

python3 "$BENCH_DIR/lib/harness_cost_summary.py" "$RUN_DIR" "$ROUNDS" $LOADS | tee "$OUT/summary.txt"
{
    readme_header "Harness cost: CPU per operation of \`stoa bench web\` beside the server's" Command
    readme_section Setup
    echo "- File set for $MAX connections; stoa serve and nginx with 1 worker, access log off, same directory."
    echo "- \`stoa bench web --static-only --connections N --run-time ${RUN_TIME}s --server-pid …\` (harness on one"
    echo "  load thread) at each load, $ROUNDS interleaved rounds (the servers' order alternates), then"
    echo "  \`--closed-loop\` with 64 connections once."
    pinning_readme
    echo "- CPU: the harness's own process CPU over its generators' run (all phases), as its report gives it;"
    echo "  the server's from /proc/PID/stat over the same run (nginx: master and worker). µs/op divides by every"
    echo "  operation finished in all phases. The user/kernel split: the harness's over the whole command"
    echo "  (\`/usr/bin/time\`, validation included), the server's over the run."
    echo "- conns/core est.: connections ÷ the harness's share of one core, a linear extrapolation."
    ((PROFILE)) && echo "- Profile: one more run against stoa at $PROFILE_LOAD, \`perf record -e cpu-clock -F 999 -g\` on the harness for 10 s of the steady phase; harness-profile.txt."
    echo "- On loopback the kernel's receive work for a segment runs on the sending CPU: the harness's kernel"
    echo "  time includes the server side's processing of the SYNs, requests, ACKs and FINs the harness sends,"
    echo "  and the server's includes the harness side's processing of the responses."
    describe_background
    readme_summary
    if ((PROFILE)); then
        readme_section "The harness's profile at $PROFILE_LOAD connections"
        echo '```'
        cat "$OUT/harness-profile.txt"
        echo '```'
    fi
} >"$OUT/README.md"
results_done
