#!/usr/bin/env bash
# Server CPU per operation under the SPECweb99-style paced workload, stoa vs nginx:
# a shim over `stoa bench peers --workload web99` (crates/bench/src/peers), which
# writes the file set, starts both servers (one worker, access log on) from
# generated configurations, runs `stoa bench web --static-only` against each at
# every load in interleaved rounds with the servers pinned to one CPU and the
# harness to the others, and gives each server's CPU (its whole process tree,
# user/kernel split) per operation beside what the disks read during the run,
# and the per-round ratio to nginx.
#
#   bench/compare-web99.sh [--loads "1600 3200"] [--run-time SECS] [--rounds 5]
#                          [--mix-load N] [--profile-load N] [--no-profile]
#                          [--baseline STOA_BINARY]
#                          [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#                          [--no-warm]
#
#   --mix-load N      also run stoa with the full SPECweb99 mix at N connections
#                     in every round (default 1600; 0: not); its CGI processes'
#                     CPU and its state thread's (the POSTs' commits) are given on
#                     lines of their own
#   --profile-load N  after the rounds, one more run per server at N connections
#                     (default: the largest load) under `perf stat` (system calls
#                     per operation) and, when inferno is installed, `perf record
#                     -g` (a flame graph per server, kept in the results archive)
#   --no-profile      no profiled run
#   --baseline BIN    a third server, stoa-base: another stoa build with the same
#                     flags, in the same interleaved rounds
#   --no-warm         do not read the whole file set before each run (by default
#                     every file is read once; what that read took from the disks
#                     is in raw.csv and summary.txt)
#
# BENCH_WAIT_IDLE=SECS waits up to SECS before each round for the machine's other
# work to fall to 10 % of the CPU. The same run without this script, from the
# repository root:
#   target/release/stoa bench peers --workload web99 --mix-load 1600 --profile-load 3200 [...]
# Results go to bench-results/<date>-<host>-web99/ (or $BENCH_OUT); each
# harness run's JSON to the results archive (`stoa bench results`).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

args=() mix=(--mix-load 1600) loads="1600 3200" profile=""
while (($#)); do
    case "$1" in
    -h | --help) usage 0 ;;
    --no-profile) profile=none; shift ;;
    --profile-load) profile="${2:?--profile-load needs a value}"; shift 2 ;;
    --mix-load) mix=(--mix-load "${2:?--mix-load needs a value}"); shift 2 ;;
    --loads) loads="${2:?--loads needs a value}"; args+=(--loads "$loads"); shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
if [[ -z "$profile" ]]; then
    profile=0
    for n in ${loads//,/ }; do ((n > profile)) && profile=$n; done
fi
needs=(nginx:nginx)
if [[ "$profile" != none ]]; then
    args+=(--profile-load "$profile")
    needs+=(perf:linux-perf)
    command -v inferno-flamegraph >/dev/null ||
        log "inferno is not installed (cargo install inferno): system calls per operation, no flame graphs"
fi
wide_port_range
run_peers web99 "${needs[@]}" -- "${mix[@]}" "${args[@]}"
