#!/usr/bin/env bash
# The LKML experiment's shape on this machine: the built-in server under the
# SPECweb99-style harness with a kernel setting at two values, judged by
# `stoa bench ab` (interleaved rounds, a sequential test; see
# docs/results-archive.md).
#
#   bench/ab-sysctl.sh [--sysctl net.ipv4.tcp_autocorking] [--a 1] [--b 0]
#                      [--metric cpu] [--connections 200] [--run-time 30s]
#                      [--max-rounds 12] [--precision 1%]
#
# Each side's setup sets the sysctl before each of its runs; the value the machine
# had is restored at the end. Results (the rounds and the verdict, `stoa bench
# compare` of the same runs, the machine) go to bench-results/<date>-<host>-ab-<name>/;
# the runs' records stay in the script's temp directory.
set -euo pipefail

# shellcheck source=bench/lib.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SYSCTL=net.ipv4.tcp_autocorking
A=1
B=0
METRIC=cpu
CONNECTIONS=200
RUN_TIME=30s
MAX_ROUNDS=12
PRECISION=1%
bench_cmdline "$@"
parse_args "--sysctl=SYSCTL --a=A --b=B --metric=METRIC --connections=CONNECTIONS --run-time=RUN_TIME
    --max-rounds=MAX_ROUNDS --precision=PRECISION" "$@"
[[ "$SYSCTL" =~ ^[a-z0-9_.]+$ ]] || die "--sysctl: a name such as net.ipv4.tcp_autocorking"
KEY="/proc/sys/${SYSCTL//./\/}"
[[ -w "$KEY" ]] || die "$KEY is not writable (run as root, and a sysctl this kernel has)"
[[ "$A$B" =~ ^[0-9\ ]+$ ]] || die "--a and --b: numeric values"
[[ "$METRIC" =~ ^(cpu|throughput|score)$ ]] || die "--metric: cpu, throughput or score"
require_positive "--connections and --max-rounds take positive integers" "$CONNECTIONS" "$MAX_ROUNDS"

ORIGINAL="$(cat "$KEY")"
restore_sysctl() { echo "$ORIGINAL" >"$KEY" || log "!!! could not restore $SYSCTL to $ORIGINAL"; }
bench_on_exit restore_sysctl
bench_setup
bench_begin "ab-${SYSCTL##*.}"

ARCHIVE="$BENCH_TMP/archive"
log "stoa bench ab: $SYSCTL=$A (A) vs $SYSCTL=$B (B), $METRIC, up to $MAX_ROUNDS rounds"
"$STOA_BIN" bench ab --archive "$ARCHIVE" --metric "$METRIC" --max-rounds "$MAX_ROUNDS" \
    --precision "$PRECISION" \
    --a-label "$SYSCTL=$A" --a-setup "echo $A > $KEY" \
    --b-label "$SYSCTL=$B" --b-setup "echo $B > $KEY" \
    -- --connections "$CONNECTIONS" --run-time "$RUN_TIME" >"$OUT/ab.txt" 2>"$OUT/ab.log" ||
    die "stoa bench ab failed: $(tail -n 3 "$OUT/ab.log")"
"$STOA_BIN" bench compare --archive "$ARCHIVE" "$SYSCTL=$A" "$SYSCTL=$B" >"$OUT/compare.txt"
cp "$OUT/ab.txt" "$OUT/summary.txt"
check_background "after the run"

{
    readme_header "\`stoa bench ab\`: $SYSCTL $A vs $B"
    readme_section "Setup"
    echo "- The harness's built-in server (\`stoa serve --web99\`) and the harness on the same 2 cores,"
    echo "  loopback, the SPECweb99-style mix at $CONNECTIONS paced connections, $RUN_TIME measured per run."
    echo "- A: \`$SYSCTL = $A\`; B: \`$SYSCTL = $B\`, set before each of that side's runs;"
    echo "  the machine's value ($ORIGINAL) restored afterwards."
    echo "- The figure: \`--metric $METRIC\`; at most $MAX_ROUNDS rounds, precision $PRECISION."
    echo "- Files: ab.txt (the rounds and the verdict), compare.txt (\`stoa bench compare\` of the same"
    echo "  runs: means, spreads, the interval, the system rows that differ), ab.log (progress)."
    readme_background
    readme_summary "Rounds and verdict"
} >"$OUT/README.md"
results_done
