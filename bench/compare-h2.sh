#!/usr/bin/env bash
# Stoa vs nginx over HTTP/2 (TLS, ALPN h2): a shim over `stoa bench peers
# --workload h2` (crates/bench/src/peers), which generates one ECDSA P-256
# certificate into its temporary directory, starts both servers (one worker,
# access log off) from generated configurations, and in interleaved rounds runs
#
#   - `h2load -c 100 -m 10 -t 1 -D DURATION --warm-up-time 1` for 1 KiB and
#     10 KiB files: requests per second;
#   - batches of `h2load -c 50 -n 50 -m 1` (50 new connections, one request
#     each, no resumption) for DURATION seconds: connections per second;
#
# with each server pinned to the same CPU (default 0) and h2load to the others,
# and each row's server CPU per request (its whole process tree's utime +
# stime over the run) and h2load's own CPU in raw.csv beside the rate.
#
#   bench/compare-h2.sh [--rounds 5] [--duration SECS] [--server-cpus LIST]
#                       [--harness-cpus LIST] [--no-pin]
#
# BENCH_WAIT_IDLE=SECS waits up to SECS before each round for the machine's other
# work to fall to 10 % of the CPU. The same run without this script, from the
# repository root:
#   target/release/stoa bench peers --workload h2 --run-time 10 [...]
# Results go to bench-results/<date>-<host>-h2/ (or $BENCH_OUT).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

run_peers h2 nginx:nginx h2load:nghttp2-client -- "$@"
