#!/usr/bin/env bash
# Server CPU per operation under the SPECweb99-style paced workload, stoa vs nginx:
# a shim over `stoa bench peers --workload web99` (crates/bench/src/peers), which
# writes the file set, starts both servers (one worker, access log on) from
# generated configurations, runs `stoa bench web --static-only` against each at
# every load in interleaved rounds with the servers pinned to one CPU and the
# harness to the others, and gives each server's CPU (its whole process tree,
# user/kernel split) per operation and the per-round ratio to nginx.
#
#   bench/compare-web99.sh [--loads "1600 3200"] [--run-time SECS] [--rounds 5]
#                          [--mix-load N] [--baseline STOA_BINARY]
#                          [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#                          [--no-warm]
#
#   --mix-load N      also run stoa with the full SPECweb99 mix at N connections
#                     in every round (default 1600; 0: not)
#   --baseline BIN    a third server, stoa-base: another stoa build with the same
#                     flags, in the same interleaved rounds
#   --no-warm         do not read the whole file set before each run
#
# The profiled run (--profile-load, perf and a flame graph) is gone: a flame
# graph is not a result to commit; run `perf record -g -p PID` by hand.
# The same run without this script, from the repository root:
#   target/release/stoa bench peers --workload web99 --mix-load 1600 [...]
# Results go to bench-results/<date>-<host>-web99/ (or $BENCH_OUT); each
# harness run's JSON to the results archive (`stoa bench results`).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

args=() mix=(--mix-load 1600)
while (($#)); do
    case "$1" in
    -h | --help) usage 0 ;;
    --no-profile) shift ;;
    --profile-load) die "--profile-load is gone: profile a server by hand (perf record -g -p PID)" ;;
    --mix-load) mix=(--mix-load "${2:?--mix-load needs a value}"); shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
wide_port_range
run_peers web99 nginx:nginx -- "${mix[@]}" "${args[@]}"
