#!/usr/bin/env bash
# Server CPU per operation under the SPECweb99-style paced workload, stoa vs nginx:
# `stoa bench web --static-only --server-pid` at each load, both servers with one
# worker, the same file set and the access log on (combined, to a file, as the kit
# requires a log), interleaved rounds. The figure is each server's utime + stime
# (from /proc/PID/stat over the run; nginx: master and worker) per operation the
# harness finished, with its user/kernel split, and the stoa/nginx ratio per round.
#
#   bench/compare-web99.sh [--loads "1600 3200"] [--run-time SECS] [--rounds 5]
#                          [--mix-load N] [--profile-load N] [--no-profile]
#                          [--baseline STOA_BINARY]
#                          [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#                          [--no-warm]
#
#   --mix-load N      also run stoa with the full SPECweb99 mix (dynamic GET, custom
#                     ads, POST, CGI) at N connections in every round (0: not); its
#                     CGI processes' CPU (children's time) and its state thread's
#                     (the POSTs' durable commits) are given on lines of their own
#   --profile-load N  after the rounds, one more run per server at N connections
#                     (default: the largest load) under `perf stat` (system calls
#                     per operation) and `perf record -g` (a flame graph per server,
#                     flame-SERVER.svg, with inferno)
#   --baseline BIN    a third server, stoa-base: another stoa build with the same
#                     flags, in the same interleaved rounds (what a change bought),
#                     the mix row included
#   --no-warm         do not read the whole file set before each run (by default
#                     every file is read once, so that the run starts with all of
#                     it in the page cache; what that read took from the disks is
#                     kept in SERVER-LABEL.warm)
#
# Each server is pinned to the same CPU (default 0) and the harness to the others,
# as in bench/harness-cost.sh; a run whose harness used more than 70 % of its
# cores is marked harness-bound in the summary. Results go to
# bench-results/<date>-<host>-web99/ (or $BENCH_OUT).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LOADS="1600 3200"
RUN_TIME=30
ROUNDS=5
MIX_LOAD=1600
PROFILE_LOAD=""
PROFILE=1
BASELINE=""
WARM=1
PIN=1
SERVER_CPUS=""
HARNESS_CPUS=""
bench_cmdline "$@"
parse_args "--loads=LOADS --run-time=RUN_TIME --rounds=ROUNDS --mix-load=MIX_LOAD --profile-load=PROFILE_LOAD
    --no-profile=PROFILE=0 --baseline=BASELINE --server-cpus=SERVER_CPUS --harness-cpus=HARNESS_CPUS
    --no-pin=PIN=0 --no-warm=WARM=0" "$@"
require_positive "--rounds and --run-time take positive integers" "$ROUNDS" "$RUN_TIME"
((ROUNDS <= 20 && RUN_TIME <= 600)) || die "at most 20 rounds of 600 s"
[[ -z "$BASELINE" || -x "$BASELINE" ]] || die "--baseline: $BASELINE is not an executable file"

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git taskset:util-linux
((PROFILE)) && ensure_commands perf:linux-perf
bench_setup
wide_port_range
((PROFILE)) && ensure_inferno
bench_begin web99

LIMIT="$(ulimit -n)"
MAX="$MIX_LOAD"
for n in $LOADS $PROFILE_LOAD; do ((n > MAX)) && MAX=$n; done
[[ -n "$PROFILE_LOAD" ]] || for n in $LOADS; do ((n > ${PROFILE_LOAD:-0})) && PROFILE_LOAD=$n; done
((MAX + 100 <= LIMIT)) || die "open-file limit $LIMIT too low for $MAX connections"
DOCROOT="$BENCH_TMP/www"
log "writing the file set for $MAX connections"
"$STOA_BIN" fileset --connections "$MAX" --dir "$DOCROOT" --cgi-dir "$BENCH_TMP/cgi-bin" >"$OUT/fileset.txt"

declare -A PORT PID ACCESS_LOG
# stoa_up NAME: a stoa with the common flags and its own access log. The dynamic
# API and CGI are on (they cost nothing on a static request) for the mix row.
stoa_up() {
    local name="$1"
    ACCESS_LOG[$name]="$BENCH_TMP/$name-access.log"
    start_stoa "$BENCH_TMP/$name-stderr.log" --docroot "$DOCROOT" --workers 1 \
        --access-log "${ACCESS_LOG[$name]}" --log-format combined --keepalive-timeout 75s \
        --max-connections "$LIMIT" --web99 --web99-state "$BENCH_TMP/$name-state" \
        --cgi-dir "$BENCH_TMP/cgi-bin"
    PORT[$name]="$STOA_PORT" PID[$name]="$STOA_PID"
    log "$name (pid $STOA_PID) on 127.0.0.1:$STOA_PORT"
}
SERVERS=(nginx stoa)
stoa_up stoa
if [[ -n "$BASELINE" ]]; then
    BASE_SHA="$(sha256sum "$BASELINE" | cut -c1-16)"
    cp "$BASELINE" "$BENCH_TMP/stoa-base"
    CANDIDATE_BIN="$STOA_BIN"
    STOA_BIN="$BENCH_TMP/stoa-base"
    stoa_up stoa-base
    STOA_BIN="$CANDIDATE_BIN"
    SERVERS+=(stoa-base)
fi
ACCESS_LOG[nginx]="$BENCH_TMP/nginx-access.log"
nginx_up "$BENCH_TMP/nginx" "$DOCROOT" 75s "$LIMIT" "${ACCESS_LOG[nginx]}" "worker_rlimit_nofile $LIMIT;"
save_config "$BENCH_TMP/nginx/nginx.conf" "$OUT/nginx.conf"
PORT[nginx]="$NGINX_PORT" PID[nginx]="$NGINX_PID"
mapfile -t NGINX_WORKERS < <(nginx_workers "$NGINX_PID")
log "nginx (master $NGINX_PID) on 127.0.0.1:$NGINX_PORT"

default_pinning
if ((PIN)); then
    for s in "${SERVERS[@]}"; do pin_tree "$SERVER_CPUS" "${PID[$s]}"; done
fi
mapfile -t PIN_ARGS < <(harness_pin_args)

# server_pids SERVER: the processes whose CPU is the server's.
server_pids() {
    if [[ $1 == nginx ]]; then echo "$NGINX_PID" "${NGINX_WORKERS[@]}"; else echo "${PID[$1]}"; fi
}

# ticks PID...: "UTIME STIME CUTIME CSTIME" clock ticks summed over the PIDs (the
# last two: children reaped, stoa's CGI scripts).
ticks() {
    local u=0 s=0 cu=0 cs=0 rest a pid
    for pid in "$@"; do
        rest="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${rest##*) }"
        read -r -a a <<<"$rest"
        u=$((u + a[11])) s=$((s + a[12])) cu=$((cu + a[13])) cs=$((cs + a[14]))
    done
    echo "$u $s $cu $cs"
}

# state_ticks PID: utime + stime of stoa's web99 state thread (the POSTs' durable
# commits), 0 if it has none.
state_ticks() {
    local t rest a
    for t in /proc/"$1"/task/*; do
        [[ "$(cat "$t/comm" 2>/dev/null)" == web99-state ]] || continue
        rest="$(cat "$t/stat" 2>/dev/null)" || continue
        rest="${rest##*) }"
        read -r -a a <<<"$rest"
        echo $((a[11] + a[12]))
        return
    done
    echo 0
}

# warm_fileset LABEL: reads every file of the set once, so that a run does not
# start with part of it out of the page cache (this VM's page cache loses a
# resting file set at a few MB per second, and a server that reads from the disk
# spends CPU on it and waits); the sectors the disks read for it and the seconds
# it took go to $OUT/LABEL.warm.
warm_fileset() {
    local start=$SECONDS disk
    disk="$(whole_disks_sum 6)"
    find "$DOCROOT" -type f -print0 | xargs -0 -P 2 -n 2000 cat >/dev/null
    echo "$disk $(whole_disks_sum 6) $((SECONDS - start))" >"$OUT/$1.warm"
}

# run_one SERVER CONNECTIONS LABEL [HARNESS-ARGS...]: one harness run; its report
# in $OUT/SERVER-LABEL/, the server's ticks before and after in .server-ticks
# (stoa: then its state thread's before and after), the sectors the disks read
# before and after in .disk (a file set not all in the page cache is read from
# disk during the run, by whichever server is serving).
run_one() {
    local server="$1" n="$2" label="$3" pids=() p before disk state=""
    shift 3
    read -r -a pids <<<"$(server_pids "$server")"
    local args=()
    for p in "${pids[@]}"; do args+=(--server-pid "$p"); done
    log "$server, $label"
    ((WARM)) && warm_fileset "$server-$label"
    before="$(ticks "${pids[@]}")"
    disk="$(whole_disks_sum 6)"
    [[ $server == nginx ]] || state="$(state_ticks "${pids[0]}")"
    "$STOA_BIN" bench web --target "http://127.0.0.1:${PORT[$server]}" --connections "$n" \
        --run-time "${RUN_TIME}s" "${PIN_ARGS[@]}" "${args[@]}" "$@" --out "$OUT/$server-$label" \
        >"$OUT/$server-$label.txt" 2>"$OUT/$server-$label.log" ||
        die "harness failed against $server: $(tail -n 3 "$OUT/$server-$label.log")"
    echo "$before $(ticks "${pids[@]}") $(getconf CLK_TCK)${state:+ $state $(state_ticks "${pids[0]}")}" \
        >"$OUT/$server-$label.server-ticks"
    echo "$disk $(whole_disks_sum 6)" >"$OUT/$server-$label.disk"
    : >"${ACCESS_LOG[$server]}" # keep the disk bounded; the log stays open and on
    rm -rf "$OUT/$server-$label"/*.html
}

for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${SERVERS[@]}"
    for n in $LOADS; do
        for s in "${ORDER[@]}"; do run_one "$s" "$n" "$n-r$r" --static-only; done
    done
    if ((MIX_LOAD > 0)); then
        for s in "${ORDER[@]}"; do
            [[ $s == nginx ]] || run_one "$s" "$MIX_LOAD" "mix-$MIX_LOAD-r$r"
        done
    fi
done
check_background "after the rounds (servers idle)"

# One more run per server under perf: system calls per operation over a window
# of the steady phase, and a flame graph (user and kernel stacks) of the same.
if ((PROFILE)); then
    for s in nginx stoa; do
        read -r -a pids <<<"$(server_pids "$s")"
        worker="${pids[-1]}"
        (
            sleep $((RUN_TIME / 3 + 5))
            perf stat -e 'syscalls:sys_enter_*' -p "$worker" -o "$OUT/$s-syscalls.perfstat" -- sleep 10 &
            perf record -q -e cpu-clock -F 999 -g -p "$worker" -o "$BENCH_TMP/$s.perf" -- sleep 10 >/dev/null 2>&1
            wait
        ) &
        profiler=$!
        run_one "$s" "$PROFILE_LOAD" "profile-$PROFILE_LOAD" --static-only
        wait "$profiler"
        perf script -i "$BENCH_TMP/$s.perf" 2>/dev/null | inferno-collapse-perf --all >"$BENCH_TMP/$s.folded"
        inferno-flamegraph --title "$s, $PROFILE_LOAD paced connections, static-only, access log on" \
            <"$BENCH_TMP/$s.folded" >"$OUT/flame-$s.svg"
        # The kernel's share and its main parts, from the same samples.
        python3 "$BENCH_DIR/lib/web99_summary.py" folded "$BENCH_TMP/$s.folded" >"$OUT/$s-profile.txt"
    done
fi

python3 "$BENCH_DIR/lib/web99_summary.py" summary "$OUT" "$ROUNDS" "$MIX_LOAD" "$PROFILE" "$PROFILE_LOAD" \
    "${SERVERS[*]}" $LOADS | tee "$OUT/summary.txt"
{
    readme_header "SPECweb99-style paced workload: server CPU per operation, stoa vs nginx" Command
    readme_section Setup
    echo "- File set for $MAX connections (\`stoa fileset\`); stoa serve and nginx with 1 worker, the same"
    echo "  directory, access log on (combined, to a file; truncated after each run, the servers keep"
    echo "  logging), keep-alive timeout 75 s. nginx: sendfile, tcp_nopush, open_file_cache (nginx.conf)."
    if ((WARM)); then
        echo "- Before each run every file of the set was read once (\`cat\`), so that the run started with all"
        echo "  of it in the page cache (SERVER-LABEL.warm: sectors read by the disks before and after, seconds)."
    else
        echo "- \`--no-warm\`: the file set was not read before the runs; the disks' reads are in the table."
    fi
    echo "- stoa: \`stoa serve --docroot \$TMP/www --workers 1 --access-log FILE --log-format combined"
    echo "  --keepalive-timeout 75s --max-connections $LIMIT --web99 --web99-state DIR --cgi-dir DIR\` (the"
    echo "  dynamic API and CGI only for the mix row; a static request does not touch them)."
    [[ -n "$BASELINE" ]] && echo "- stoa-base: the baseline build \`$BASELINE\` (sha256 $BASE_SHA…), same flags as stoa."
    echo "- \`stoa bench web --static-only --connections N --run-time ${RUN_TIME}s --server-pid …\` at each load,"
    echo "  $ROUNDS rounds; in each round every load runs against every server, in an order that alternates."
    ((MIX_LOAD > 0)) && echo "- Mix row: \`stoa bench web --connections $MIX_LOAD\` (the full SPECweb99 mix) against stoa${BASELINE:+ and stoa-base}, each round."
    pinning_readme
    echo "- Server CPU: utime + stime over the run from /proc/PID/stat (nginx: master and worker), divided"
    echo "  by every operation the harness finished in all phases; kernel = stime's share. CGI: the children's"
    echo "  time (cutime + cstime) stoa reaped over the run, per operation of the whole mix. Commits: the"
    echo "  web99-state thread's utime + stime (/proc/PID/task/TID/stat), per operation and per POST sent;"
    echo "  dynamic op / static op = (mix/static − 0.70) / 0.30, with and without the commits."
    echo "- On loopback the kernel's receive work for a segment runs on the sending CPU: each server's"
    echo "  kernel time includes the harness side's processing of the responses (and its wake-ups)."
    ((PROFILE)) && echo "- Profile: one more run per server at $PROFILE_LOAD, \`perf stat -e 'syscalls:sys_enter_*'\` and \`perf record -e cpu-clock -F 999 -g\` on the worker for 10 s of the steady phase; flame-SERVER.svg (inferno), SERVER-profile.txt."
    readme_background
    readme_summary
} >"$OUT/README.md"
results_done
