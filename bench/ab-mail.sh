#!/usr/bin/env bash
# `stoa bench ab --mail` on real mail systems: stoa (the harness's built-in
# server) against Postfix + Dovecot (bench/mail-sut.sh), or either against
# itself, under the SPECmail2001-style harness at one fixed load, judged on the
# servers' CPU per session (interleaved rounds, a sequential test; see
# docs/results-archive.md).
#
#   bench/ab-mail.sh [--a stoa|postfix-dovecot] [--b stoa|postfix-dovecot]
#                    [--store-users 10000] [--rate 1200] [--scheme sha512-crypt]
#                    [--warmup 30s] [--run-time 60s] [--metric cpu]
#                    [--max-rounds 6] [--precision 2%]
#
# A built-in stoa starts fresh and is filled for each of its runs (the harness
# does it). Postfix + Dovecot is started and filled once (`stoa bench mail
# --init-only`) and serves every run of its side: the load keeps its store at the
# steady state. Both sides verify the same {SCHEME} hashes. Each run is the 100 %
# level only; the store is a declared one (non-compliant below 200 x rate). With
# --a and --b the same system, the comparison is of that system against itself.
# Results (the rounds and the verdict, `stoa bench compare` of the same runs, the
# machine) go to bench-results/<date>-<host>-ab-mail/; the runs' records stay in
# the script's temp directory.
set -euo pipefail

# shellcheck source=bench/lib.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

A=stoa
B=postfix-dovecot
STORE_USERS=10000
RATE=1200
SCHEME=sha512-crypt
WARMUP=30s
RUN_TIME=60s
METRIC=cpu
MAX_ROUNDS=6
PRECISION=2%
# The same load (arrival times, sizes, recipients) for every run.
SEED=2001
DOMAIN=stoa.test
REMOTE_DOMAIN=remote.test
bench_cmdline "$@"
parse_args "--a=A --b=B --store-users=STORE_USERS --rate=RATE --scheme=SCHEME --warmup=WARMUP
    --run-time=RUN_TIME --metric=METRIC --max-rounds=MAX_ROUNDS --precision=PRECISION" "$@"
for side in "$A" "$B"; do
    [[ "$side" =~ ^(stoa|postfix-dovecot)$ ]] || die "--a and --b are stoa or postfix-dovecot"
done
require_positive "--store-users, --rate and --max-rounds take positive integers" \
    "$STORE_USERS" "$RATE" "$MAX_ROUNDS"
((STORE_USERS >= 10 && STORE_USERS <= 1000000)) || die "--store-users: 10 to 1000000"
SCHEME="${SCHEME,,}"
dovecot_scheme "$SCHEME" >/dev/null || die "--scheme is argon2id, sha512-crypt, blf-crypt, ssha or plain"
for d in "$WARMUP" "$RUN_TIME"; do
    [[ "$d" =~ ^[0-9]+(s|m|min)?$ ]] || die "--warmup and --run-time: durations such as 60s"
done
[[ "$METRIC" =~ ^(cpu|throughput|score)$ ]] || die "--metric: cpu, throughput or score"

NEED_PD=""
if [[ "$A" == postfix-dovecot || "$B" == postfix-dovecot ]]; then NEED_PD=1; fi
if [[ -n "$NEED_PD" ]]; then
    [[ "$(id -u)" == 0 ]] || die "run as root: Postfix's and Dovecot's masters start as root"
fi
# The SUT (lib/mail.sh's sut_start), under BENCH_TMP.
bench_on_exit sut_stop
bench_setup
bench_begin ab-mail

# Each side's flags: nothing for the built-in stoa; Postfix + Dovecot's addresses,
# sink, fill journal and masters (the CPU by program covers every process they start).
PD_TARGET=""
PD_FLAGS=""
if [[ -n "$NEED_PD" ]]; then
    SINK="127.0.0.1:$(free_port)"
    log "starting Postfix + Dovecot for $STORE_USERS users ($SCHEME)"
    sut_start "$BENCH_TMP/sut" "$STORE_USERS" "$SCHEME" "$SINK" "$OUT/pd-sut"
    JOURNAL="$BENCH_TMP/init-pd.journal"
    log "filling Postfix + Dovecot's store (init-only)"
    "$STOA_BIN" bench mail --init-only --smtp "$SMTP_ADDR" --pop3 "$POP3_ADDR" --sink-listen "$SINK" \
        --store-users "$STORE_USERS" --rate "$RATE" --domain "$DOMAIN" --init-journal "$JOURNAL" \
        >"$OUT/pd-init.txt" 2>"$OUT/pd-init.log" || die "the fill failed: $(tail -n 3 "$OUT/pd-init.log")"
    PD_TARGET="$SMTP_ADDR,$POP3_ADDR"
    PD_FLAGS="--sink-listen $SINK --init-journal $JOURNAL --server-pid $POSTFIX_PID --server-pid $DOVECOT_PID"
fi
# side_flags SYSTEM: `stoa bench ab`'s flags for the side that SYSTEM is (A or B).
side_flags() {
    local x="$1" system="$2"
    if [[ "$system" == postfix-dovecot ]]; then
        printf '%s\0' "--$x-target" "$PD_TARGET" "--$x-flags" "$PD_FLAGS --server-software '$PD_SOFTWARE'"
    fi
}
A_LABEL="$A"
B_LABEL="$B"
if [[ "$A" == "$B" ]]; then A_LABEL="$A (A)" B_LABEL="$B (B)"; fi
mapfile -d '' A_FLAGS < <(side_flags a "$A")
mapfile -d '' B_FLAGS < <(side_flags b "$B")
ARCHIVE="$BENCH_TMP/archive"
HARNESS=(--store-users "$STORE_USERS" --rate "$RATE" --password-scheme "$SCHEME" --levels 100
    --warmup "$WARMUP" --run-time "$RUN_TIME" --cooldown 10s --seed "$SEED" --domain "$DOMAIN")
CMD=("$STOA_BIN" bench ab --mail --archive "$ARCHIVE" --metric "$METRIC" --max-rounds "$MAX_ROUNDS"
    --precision "$PRECISION" --a-label "$A_LABEL" "${A_FLAGS[@]}" --b-label "$B_LABEL" "${B_FLAGS[@]}"
    -- "${HARNESS[@]}")
show_cmd "${CMD[@]}" | sed "s#$BENCH_TMP#\$TMP#g" >"$OUT/command.txt"
log "stoa bench ab --mail: $A_LABEL vs $B_LABEL, $METRIC, up to $MAX_ROUNDS rounds"
"${CMD[@]}" >"$OUT/ab.txt" 2>"$OUT/ab.log" || die "stoa bench ab failed: $(tail -n 3 "$OUT/ab.log")"
"$STOA_BIN" bench compare --archive "$ARCHIVE" "$A_LABEL" "$B_LABEL" >"$OUT/compare.txt"
cp "$OUT/ab.txt" "$OUT/summary.txt"
check_background "after the run"

{
    readme_header "\`stoa bench ab --mail\`: $A_LABEL vs $B_LABEL"
    readme_section "Setup"
    echo "- Both systems and the harness on the same 2 cores, loopback. A: $A_LABEL; B: $B_LABEL."
    if [[ -n "$NEED_PD" ]]; then
        echo "- Postfix + Dovecot: $PD_SOFTWARE from bench/mail-sut.sh, started and filled once,"
        echo "  serving every run of its side; its CPU is its two masters and every process they start."
    fi
    echo "- stoa: the harness's built-in server, started fresh and filled for each run."
    echo "- The load: SPECmail2001-style, $RATE msgs/min (the 100 % level only), a declared store of"
    echo "  $STORE_USERS accounts ({${SCHEME^^}} hashes on both systems), $WARMUP warm-up, $RUN_TIME measured."
    echo "- The figure: \`--metric $METRIC\`; at most $MAX_ROUNDS rounds, precision $PRECISION."
    echo "- Files: command.txt (the command), ab.txt (the rounds and the verdict), compare.txt"
    echo "  (\`stoa bench compare\` of the same runs: means, spreads, the interval, the system rows"
    echo "  that differ), ab.log (progress; the runs' own logs stay in the temp directory)."
    readme_background
    readme_summary "Rounds and verdict"
} >"$OUT/README.md"
results_done
