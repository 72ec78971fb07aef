#!/usr/bin/env bash
# Stoa vs nginx, static files over loopback, interleaved rounds of wrk: a shim
# over `stoa bench peers --workload static` (crates/bench/src/peers), which
# starts both servers from generated configurations, pins them and wrk, accounts
# each server's CPU per process tree and writes the result directory. Before the
# rounds and after every run each file is fetched from each server and compared
# byte for byte (a server that serves other bytes stops the comparison); the
# machine's other work is sampled before and after the rounds and measured over
# every run (raw.csv's other_cpu_pct), and BENCH_WAIT_IDLE=SECS waits up to SECS
# before each round for it to fall to 10 % of the CPU.
#
#   bench/compare-static.sh [--rounds N] [--duration SECS] [--threads T] [--connections C]
#                           [--baseline STOA_BINARY]
#                           [--server-cpus LIST] [--harness-cpus LIST] [--no-pin]
#
# The same run without this script, from the repository root:
#   target/release/stoa bench peers --workload static [--run-time SECS] [...]
# Results go to bench-results/<date>-<host>-static/ (or $BENCH_OUT). See
# bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

run_peers static nginx:nginx wrk:wrk -- "$@"
