#!/usr/bin/env bash
# Stoa's event-loop model: --runtime per-core vs --runtime multi-thread, both
# --workers 2, interleaved rounds of wrk over loopback: a shim over `stoa bench
# peers --workload static` with the two configurations of one build as `stoa`
# (per-core) and `stoa-base` (multi-thread); the ratio stoa/stoa-base is
# per-core/multi-thread. Not pinned: wrk and both servers share the machine.
#
#   bench/compare-runtime.sh [--rounds N] [--duration SECS] [--threads T]
#                            [--connections 64,256] [--access-log on|off]
#
# Rows: {1k,100k} x {keep-alive, close} x each connection count. The same run
# without this script, from the repository root:
#   target/release/stoa bench peers --workload static --servers stoa,stoa-base \
#       --files 1k,100k --connections 64,256 --no-pin \
#       --stoa-flags "--workers 2 --runtime per-core" \
#       --baseline-flags "--workers 2 --runtime multi-thread"
# Results go to bench-results/<date>-<host>-runtime/ (or $BENCH_OUT).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

common="--workers 2" args=() conns=64,256
while (($#)); do
    case "$1" in
    -h | --help) usage 0 ;;
    --connections) conns="${2:?--connections needs a value}"; shift 2 ;;
    --access-log)
        case "${2:-}" in
        on) ;;
        off) common+=" --access-log off" ;;
        *) die "--access-log is on or off" ;;
        esac
        shift 2
        ;;
    *) args+=("$1"); shift ;;
    esac
done
BENCH_OUT="${BENCH_OUT:-bench-results/$(date +%F)-$(hostname)-runtime}"
run_peers static wrk:wrk -- --servers stoa,stoa-base --files 1k,100k --connections "$conns" --no-pin \
    --stoa-flags "$common --runtime per-core" --baseline-flags "$common --runtime multi-thread" "${args[@]}"
